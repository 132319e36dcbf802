# lint_common.sh: what the tree's lints share (sourced by include_rules.sh and
# store_access.sh, run from the tree's root). Each reports a violation as
# "file:line: text  <- the rule" and counts it in $violations.

# forbid FOLDER REGEX RULE: no source file under FOLDER may match REGEX.
forbid() {
    local folder=$1 pattern=$2 rule=$3 hits
    [ -d "$folder" ] || return 0
    hits=$(grep -rnE --include='*.h' --include='*.hpp' --include='*.cpp' --include='*.cu' --include='*.cuh' \
        --include='*.inc' -e "$pattern" "$folder")
    if [ -n "$hits" ]; then
        while IFS= read -r hit; do printf '%s  <- %s\n' "$hit" "$rule"; done <<<"$hits"
        violations=$((violations + $(wc -l <<<"$hits")))
    fi
}
# An #include of a header under one of the given top folders ("engine|collectors").
includes() { printf '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(%s)/' "$1"; }

# forbid_code FOLDER REGEX RULE [EXCEPT]: as forbid, on the code of a line (what is left
# of its // comment); hits (file:line: text) matching EXCEPT aside.
forbid_code() {
    local folder=$1 pattern=$2 rule=$3 except=${4:-} hit code
    [ -d "$folder" ] || return 0
    while IFS= read -r hit; do
        [ -n "$hit" ] || continue
        code=${hit#*:*:}
        code=${code%%//*}
        grep -qE -e "$pattern" <<<"$code" || continue
        [ -n "$except" ] && grep -qE -e "$except" <<<"$hit" && continue
        printf '%s  <- %s\n' "$hit" "$rule"
        violations=$((violations + 1))
    done < <(grep -rnE --include='*.h' --include='*.hpp' --include='*.cpp' --include='*.cu' --include='*.cuh' \
        --include='*.inc' -e "$pattern" "$folder")
}
