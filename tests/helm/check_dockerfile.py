#!/usr/bin/env python3
"""Lint-like checks of deploy/Dockerfile (docker cannot run in CI): stages
and COPY --from refer to defined stages, the scripts it runs exist, the paths
and user the chart relies on are what the image provides, and (where
apt-cache works) every runtime package exists in this Debian release."""
import re
import shutil
import subprocess
import sys

root = sys.argv[1]
text = open(f"{root}/deploy/Dockerfile", encoding="utf-8").read()
logical = re.sub(r"\\\n", " ", text)
errors = []
stages = re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", logical, re.M | re.I)
if stages != ["build", "runtime"]:
    errors.append(f"stages {stages}, want build then runtime")
for src in re.findall(r"COPY\s+--from=(\S+)", logical):
    if src not in stages:
        errors.append(f"COPY --from={src}: no such stage")
for script in ("scripts/install-deps.sh", "scripts/build.sh"):
    if script not in logical:
        errors.append(f"{script} not used")
    try:
        open(f"{root}/{script}").close()
    except OSError:
        errors.append(f"{script} missing in the repository")
templates = "".join(open(f"{root}/helm/templates/{t}", encoding="utf-8").read()
                    for t in ("coordinator.yaml", "agent.yaml", "analyzer.yaml"))
for path in re.findall(r"(/opt/tunefarm/[\w/.-]+)", templates):
    base = "/".join(path.split("/")[:4])
    if base not in logical:
        errors.append(f"chart uses {path}; the image has no {base}")
for daemon in ("tunefarm-coordinator", "tunefarm-agent", "tunefarm-analyzer"):
    if f"/opt/tunefarm/bin/{daemon}" not in templates:
        errors.append(f"chart does not run /opt/tunefarm/bin/{daemon}")
    if f"build/bin/{daemon}" not in logical:
        errors.append(f"image does not copy build/bin/{daemon}")
helpers = open(f"{root}/helm/templates/_helpers.tpl", encoding="utf-8").read()
uid = re.search(r"runAsUser:\s*(\d+)", helpers).group(1)
if not re.search(rf"^USER\s+{uid}\b", logical, re.M):
    errors.append(f"image USER is not the chart's runAsUser {uid}")
runtime = logical.split("AS runtime", 1)[-1]
m = re.search(r"--no-install-recommends\s+(.*?)&&", runtime)
pkgs = m.group(1).split() if m else []
if not pkgs:
    errors.append("no runtime apt-get install found")
elif shutil.which("apt-cache"):
    out = subprocess.run(["apt-cache", "policy"] + pkgs, capture_output=True,
                         text=True).stdout
    found = {}
    for block in re.split(r"^(?=\S)", out, flags=re.M):
        head = block.split(":", 1)[0].strip()
        found[head] = "Candidate:" in block and "Candidate: (none)" not in block
    for p in pkgs:
        if not found.get(p):
            errors.append(f"runtime package {p} is not in this Debian's archive")
for e in errors:
    print(f"deploy/Dockerfile: {e}", file=sys.stderr)
print(f"check_dockerfile: {len(pkgs)} runtime packages, stages {stages}"
      + (" ok" if not errors else " FAILED"))
sys.exit(1 if errors else 0)
