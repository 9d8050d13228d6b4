"""A repaired wheel is installable on glibc 2.28 and ships stripped binaries.

    python .ci/wheel_check.py WHEEL SIZES

Exits non-zero unless the wheel has a manylinux tag of glibc 2.28 or older (RHEL/Rocky 8,
Ubuntu 20.04, Debian 11) and no shared object in it has a symbol table or debug sections
or profile instrumentation (a .gcda file name);
appends the wheel's name, size and unpacked size to SIZES.  Used by .ci/wheels and
.ci/sid_wheels, so every wheel CI builds meets the same bar.
"""

import os
import re
import subprocess
import sys
import tempfile
import zipfile

path, sizes = sys.argv[1], sys.argv[2]
name = os.path.basename(path)
glibc = [int(m) for m in re.findall(r"manylinux_2_(\d+)_", name)]
if not glibc or min(glibc) > 28:
    sys.exit(f"CI: {name} needs glibc 2.{min(glibc) if glibc else '?'} (> 2.28)")
with zipfile.ZipFile(path) as z, tempfile.TemporaryDirectory() as tmp:
    unpacked = sum(i.file_size for i in z.infolist())
    for info in z.infolist():
        if info.filename.endswith(".so") or ".so." in info.filename:
            f = z.extract(info, tmp)
            sections = subprocess.run(
                ["readelf", "-S", "-W", f], capture_output=True, text=True, check=True
            ).stdout
            if ".debug_" in sections or ".symtab" in sections:
                sys.exit(f"CI: {info.filename} in {name} is not stripped")
            # An object built with -fprofile-generate names its profile file; a release
            # binary holding one would write profiles wherever it runs.
            with open(f, "rb") as so:
                if b".gcda" in so.read():
                    sys.exit(f"CI: {info.filename} in {name} holds profile-instrumented code")
with open(sizes, "a") as f:
    f.write(f"{name:60s} {os.path.getsize(path):12d} {unpacked:12d}\n")
print(f"{name}: {os.path.getsize(path)} bytes ({unpacked} unpacked), stripped")
