"""The PASS/FAIL reporting the kilnc test scripts share: check() prints one line per check and
records the failures in FAILURES."""

FAILURES = []


def check(cond, what, detail=""):
    print(f"{'PASS' if cond else 'FAIL'} {what}")
    if not cond:
        FAILURES.append(what)
        if detail:
            print("  " + str(detail).replace("\n", "\n  "))
    return cond
