#!/usr/bin/env python3
"""scripts/plot_simulation.py without matplotlib: it says what to install and exits 3; it never
runs apt-get (a fake apt-get first on PATH records any call). matplotlib is hidden from the
script whether or not this machine has it.
    plot_never_installs.py SCRIPT
"""
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]
with tempfile.TemporaryDirectory() as d:
    marker = os.path.join(d, "apt-get-was-run")
    fake = os.path.join(d, "apt-get")
    with open(fake, "w") as f:
        f.write("#!/bin/sh\ntouch '%s'\n" % marker)
    os.chmod(fake, 0o755)
    data = os.path.join(d, "in.json")
    with open(data, "w") as f:
        f.write('{"runs": []}')
    hide = ("import sys, runpy; sys.modules['matplotlib'] = None; sys.argv = [%r, %r, 'out.png']; "
            "runpy.run_path(%r, run_name='__main__')" % (script, data, script))
    env = dict(os.environ, PATH=d + os.pathsep + os.environ.get("PATH", ""), RUNGS_PLOT_REEXEC="1")
    p = subprocess.run([sys.executable, "-c", hide], env=env, capture_output=True, text=True)
    ok = p.returncode == 3 and not os.path.exists(marker) and "apt-get install python3-matplotlib" in p.stderr
    if not ok:
        print("FAILED: status %d, apt-get run: %s, stderr: %s" % (p.returncode, os.path.exists(marker), p.stderr))
        sys.exit(1)
print("ok: " + p.stderr.strip())
