"""The plain runner of the Python test files: every module-level test_* function in name order,
"ok" or "FAIL" (with the traceback) per test, a count, exit status 1 on any failure. pytest
collects the same functions; this runner needs nothing but the installed package."""

import traceback


def run(namespace: dict) -> int:
    tests = [v for k, v in sorted(namespace.items()) if k.startswith("test_") and callable(v)]
    failed = 0
    for t in tests:
        try:
            t()
            print(f"ok   {t.__name__}")
        except Exception:  # noqa: BLE001 - report every failing test, then the count
            failed += 1
            print(f"FAIL {t.__name__}")
            traceback.print_exc()
    print(f"{len(tests) - failed} passed, {failed} failed")
    return 1 if failed else 0
