"""`pip install --no-build-isolation .` from the checkout into a virtual
environment (python3 -m venv --system-site-packages), as docs/python.md
says, then a program run outside the checkout imports idem and uses it.

ctest sets IDEM_BUILD_DIR to its build directory, so setup.py builds the
extension there (already built: nothing compiles); without it setup.py
configures and builds build-pip/."""

import os
import subprocess
import sys
import textwrap

from conftest import SOURCE_DIR

PROGRAM = textwrap.dedent("""
    import sys, idem
    assert "site-packages" in idem.__file__, idem.__file__
    with idem.Engine.open(sys.argv[1]) as engine:
        first = engine.process("a", lambda txn, m: txn.put("k", b"1"))
        again = engine.process("a", lambda txn, m: txn.put("k", b"2"))
        print(first.outcome.name, again.outcome.name, engine.get_state("k"))
""")


def test_pip_installs_the_package_into_a_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages",
                    str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"  # no look-up of a newer pip
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--no-build-isolation",
         "--no-index", "--quiet", str(SOURCE_DIR)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1800)
    assert install.returncode == 0, install.stdout + install.stderr
    run = subprocess.run(
        [str(venv / "bin" / "python"), "-c", PROGRAM, str(tmp_path / "s")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["PROCESSED", "DUPLICATE", "b'1'"]
