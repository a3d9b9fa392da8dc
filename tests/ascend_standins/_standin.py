"""Shared helpers of the Ascend stand-ins (npu-smi, msprof, ascend-python).

The failure mode comes from TF_STANDIN_MODE, or from the file named by
TF_STANDIN_MODE_FILE (read at every call, so a test can switch modes under a
running agent). A card can have its own mode: <TF_STANDIN_MODE_FILE>.dev<N>,
when it exists, wins for calls that see ASCEND_RT_VISIBLE_DEVICES=N (so one
card of a farm can fail while the others work). Fixture files come from TF_ASCEND_FIXTURES, default
<repo>/../shared/fixtures/ascend.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def mode():
    path = os.environ.get("TF_STANDIN_MODE_FILE", "")
    dev = os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "")
    if path and dev and os.path.exists("%s.dev%s" % (path, dev)):
        path = "%s.dev%s" % (path, dev)
    if path and os.path.exists(path):
        with open(path) as f:
            return f.read().strip()
    return os.environ.get("TF_STANDIN_MODE", "ok").strip() or "ok"


def fixtures():
    return os.environ.get(
        "TF_ASCEND_FIXTURES",
        os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "fixtures", "ascend")))


def log(line):
    path = os.environ.get("TF_STANDIN_LOG", "")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
