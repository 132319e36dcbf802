"""checks.py: what the Python test scripts share. Each check that fails is printed
("FAIL: ...") and counted, so a script goes on to report every failure, then exits 1.
The scripts import it by path (tests/support on sys.path)."""
import os
import shutil

failures = []


def check(condition, message):
    """Counts `message` as a failure, and prints it, when `condition` is false."""
    if not condition:
        failures.append(message)
        print("FAIL: " + message)


def failed():
    """Whether any check failed (saying how many)."""
    if failures:
        print("%d check(s) failed" % len(failures))
    return bool(failures)


def exit_code(work=None):
    """The script's exit code: 1 when a check failed (`work`, its scratch folder, kept to
    look at), else 0 with `work` removed."""
    if failed():
        return 1
    if work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def copy_real_trace(real, relative, work):
    """A copy in `work` of the real trace `relative` under `real` (reading a trace caches
    its import beside it), or None, said, when that file is absent."""
    source = os.path.join(real, relative)
    if not os.path.exists(source):
        print("real trace %s absent: not checked" % relative)
        return None
    copy = os.path.join(work, os.path.basename(relative))
    shutil.copyfile(source, copy)
    return copy
