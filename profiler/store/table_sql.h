// table_sql.h: SQL over ember's tables, checked against their declarations when it
// compiles.
//
// Reports and exports read the trace through TraceReader's visitors, or, where SQLite
// does the work better (a GROUP BY, a UNION ordered by an index, a join on the
// correlation id), through a query of their own. Such a query is a store::TableSql: its
// every name is checked at compile time against tables.h, so a query cannot name a table
// or a column that is not declared, and renaming a column breaks the build, not a
// report. store::query() runs it on a reader's file; a column the file lacks (added by a
// later schema version) reads as its declared default there too, as in the reader.
//
// A name is a declared table, a column of a table the query names, an alias the query
// declares ("kernels AS k", "kernels k", "COUNT(*) AS n"), rowid, an SQL keyword, or a function called with "(".
//
// [SECTION] Tokens
// [SECTION] The check
// [SECTION] TableSql and query()
#pragma once

#include "profiler/store/sqlite_util.h"
#include "profiler/store/tables.h"

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ember::store {

class TraceReader;

namespace table_sql {

// ---------------------------------------------------------------------------
// [SECTION] Tokens
// ---------------------------------------------------------------------------

constexpr bool is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
constexpr bool is_name_char(char c) {
    return is_name_start(c) || (c >= '0' && c <= '9');
}

constexpr bool same_word(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
        if (lower(a[i]) != lower(b[i])) return false;
    }
    return true;
}

// A name in the SQL text, and what surrounds it.
struct Name {
    std::string_view text;
    std::size_t offset = 0;
    bool qualified = false;  // follows "x." (a column of table or alias x)
    bool called = false;     // followed by "(": a function or a keyword before a parenthesis
};

// Calls visit(Name) for each name, skipping string literals, numbers, parameters and
// comments.
template <typename Visit>
constexpr void for_each_name(std::string_view sql, Visit visit) {
    std::size_t i = 0;
    bool after_dot = false;
    while (i < sql.size()) {
        const char c = sql[i];
        if (c == '\'') {  // 'text', with '' inside
            for (++i; i < sql.size(); ++i) {
                if (sql[i] != '\'') continue;
                if (i + 1 < sql.size() && sql[i + 1] == '\'')
                    ++i;
                else
                    break;
            }
            ++i;
        } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
            while (i < sql.size() && sql[i] != '\n') ++i;
        } else if ((c >= '0' && c <= '9') || c == '?' || c == ':' || c == '@' || c == '$') {
            for (++i; i < sql.size() && (is_name_char(sql[i]) || sql[i] == '.'); ++i) {
            }
        } else if (is_name_start(c)) {
            Name name;
            name.offset = i;
            while (i < sql.size() && is_name_char(sql[i])) ++i;
            name.text = sql.substr(name.offset, i - name.offset);
            name.qualified = after_dot;
            std::size_t next = i;
            while (next < sql.size() && sql[next] == ' ') ++next;
            name.called = next < sql.size() && sql[next] == '(';
            visit(name);
        } else {
            ++i;
        }
        after_dot = c == '.';
    }
}

// ---------------------------------------------------------------------------
// [SECTION] The check
// ---------------------------------------------------------------------------

inline constexpr std::string_view kKeywords[] = {
    "select", "distinct", "all",     "from",  "where",  "and",     "or",     "not",   "in",      "is",
    "null",   "order",    "by",      "group", "having", "asc",     "desc",   "limit", "offset",  "union",
    "as",     "join",     "left",    "inner", "cross",  "on",      "using",  "case",  "when",    "then",
    "else",   "end",      "between", "like",  "glob",   "escape",  "exists", "cast",  "integer", "real",
    "text",   "blob",     "nulls",   "first", "last",   "collate", "nocase", "with",  "rowid"};
inline constexpr std::string_view kFunctions[] = {"min",      "max",    "sum",    "count", "avg",    "total",
                                                  "coalesce", "ifnull", "typeof", "abs",   "length", "round"};

constexpr bool is_one_of(std::string_view word, std::span<const std::string_view> words) {
    for (std::string_view w : words)
        if (same_word(word, w)) return true;
    return false;
}

constexpr bool has_column(const TableInfo& table, std::string_view column) {
    for (const ColumnInfo& c : table.columns)
        if (column == c.name) return true;
    return false;
}

// The declared tables a query names (at most 8) and the aliases it declares.
struct Scope {
    std::array<const TableInfo*, 8> tables{};
    std::size_t table_count = 0;
    std::array<std::string_view, 16> aliases{};
    std::size_t alias_count = 0;
    bool overflow = false;

    constexpr bool is_alias(std::string_view name) const {
        for (std::size_t i = 0; i < alias_count; ++i)
            if (aliases[i] == name) return true;
        return false;
    }
    constexpr bool is_column(std::string_view name) const {
        for (std::size_t i = 0; i < table_count; ++i)
            if (has_column(*tables[i], name)) return true;
        return false;
    }
};

constexpr void add_alias(Scope& scope, std::string_view alias) {
    if (scope.alias_count == scope.aliases.size())
        scope.overflow = true;
    else
        scope.aliases[scope.alias_count++] = alias;
}

constexpr void add_table(Scope& scope, const TableInfo* table) {
    for (std::size_t i = 0; i < scope.table_count; ++i)
        if (scope.tables[i] == table) return;
    if (scope.table_count == scope.tables.size())
        scope.overflow = true;
    else
        scope.tables[scope.table_count++] = table;
}

constexpr Scope scope_of(std::string_view sql) {
    Scope scope;
    bool after_as = false, after_table = false;
    for_each_name(sql, [&](const Name& name) {
        const bool implicit_alias = after_table && !name.called && !is_one_of(name.text, kKeywords);
        after_table = false;
        if (after_as || implicit_alias) {
            add_alias(scope, name.text);
        } else if (const TableInfo* table = find_table(name.text); table && !name.qualified && !name.called) {
            add_table(scope, table);
            after_table = true;
        }
        after_as = same_word(name.text, "as");
    });
    return scope;
}

// The first name of `sql` that is not declared (see the top of this file); empty when
// every name is. "(no table)" for a query that names no declared table.
constexpr std::string_view first_undeclared_name(std::string_view sql) {
    const Scope scope = scope_of(sql);
    if (scope.overflow) return "(too many tables or aliases)";
    if (scope.table_count == 0) return "(no table)";
    std::string_view undeclared;
    for_each_name(sql, [&](const Name& name) {
        if (!undeclared.empty()) return;
        if (name.called) {
            if (!is_one_of(name.text, kFunctions) && !is_one_of(name.text, kKeywords)) undeclared = name.text;
            return;
        }
        if (is_one_of(name.text, kKeywords) || scope.is_alias(name.text) || scope.is_column(name.text)) return;
        if (!name.qualified && find_table(name.text)) return;
        undeclared = name.text;
    });
    return undeclared;
}

// Not defined: called only when a TableSql fails its check, which makes the
// compile-time evaluation fail with this name in the message.
void table_sql_names_a_table_or_column_not_declared_in_tables_h();

}  // namespace table_sql

// ---------------------------------------------------------------------------
// [SECTION] TableSql and query()
// ---------------------------------------------------------------------------

// A query over ember's tables, checked at compile time: built only from a string
// literal (or another constant) whose names are all declared.
class TableSql {
  public:
    consteval TableSql(const char* text) : text_(text) {  // NOLINT: implicit, from a literal
        if (!table_sql::first_undeclared_name(text_).empty())
            table_sql::table_sql_names_a_table_or_column_not_declared_in_tables_h();
    }
    constexpr std::string_view text() const { return text_; }

  private:
    std::string_view text_;
};

// Prepares `sql` on the reader's file. Each column the file lacks, named by a query
// whose tables all lack it, reads as its declared default. Throws TraceError naming the
// file and the query on an SQL error.
Statement query(const TraceReader& reader, TableSql sql);

// `sql` with each unqualified column that `absent(table, column)` says the file lacks
// replaced by its declared default. Each SELECT of a compound query is judged by the
// tables it names (the whole query's, for a SELECT that names none): the column is
// replaced when every one of them that declares it lacks it. Exposed for tests;
// query() uses it.
template <typename Absent>
std::string with_file_defaults(std::string_view sql, Absent absent) {
    // Where each SELECT begins.
    std::vector<std::size_t> starts;
    table_sql::for_each_name(sql, [&](const table_sql::Name& name) {
        if (table_sql::same_word(name.text, "select")) starts.push_back(name.offset);
    });
    // Each SELECT's scope, read once: the tables it names, else the whole query's.
    const table_sql::Scope whole = table_sql::scope_of(sql);
    std::vector<table_sql::Scope> scopes;
    for (std::size_t i = 0; i < starts.size(); ++i) {
        const std::size_t end = i + 1 < starts.size() ? starts[i + 1] : sql.size();
        const table_sql::Scope scope = table_sql::scope_of(sql.substr(starts[i], end - starts[i]));
        scopes.push_back(scope.table_count > 0 ? scope : whole);
    }
    std::size_t segment = 0;  // the SELECT the current name is in (names come in order)
    std::string out;
    std::size_t copied = 0;
    table_sql::for_each_name(sql, [&](const table_sql::Name& name) {
        if (name.called || name.qualified || find_table(name.text)) return;
        while (segment + 1 < starts.size() && starts[segment + 1] <= name.offset) ++segment;
        const table_sql::Scope& scope = starts.empty() || name.offset < starts[0] ? whole : scopes[segment];
        const char* default_sql = nullptr;
        bool present = false;
        for (std::size_t i = 0; i < scope.table_count; ++i) {
            for (const ColumnInfo& column : scope.tables[i]->columns) {
                if (name.text != column.name) continue;
                if (!absent(*scope.tables[i], column))
                    present = true;
                else if (column.options.default_sql)
                    default_sql = column.options.default_sql;
            }
        }
        if (present || default_sql == nullptr) return;
        out.append(sql.substr(copied, name.offset - copied));
        out.append("(").append(default_sql).append(")");
        copied = name.offset + name.text.size();
    });
    out.append(sql.substr(copied));
    return out;
}

}  // namespace ember::store
