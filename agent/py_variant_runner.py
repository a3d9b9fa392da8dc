"""tunefarm-py-runner: the persistent runner of a board whose operator program
is a Python script (the ascend board; agent/ascend_board.h). It is
tunefarm-variant-runner's counterpart (agent/variant_runner_main.cc) and
speaks the same protocol with agent/variant_runner.h on fd 3:

  request: a frame of strings: the program (a .py file), cwd, stdout path,
           stderr path, then the stage's argv (argv[0] is the program);
  reply:   ("exit", code) once the stage has run, or ("error", why) when the
           program cannot be loaded (missing, unreadable, a folder).
  A frame is a u32 count, then a u32 length and the bytes of each string
  (little-endian, as the board writes them).

The program is imported once, as a module (its `if __name__ == "__main__"`
block does not run), and each stage calls its `main()` with sys.argv set to
the stage's argv, in the stage's folder, with fds 1 and 2 sent to the
stage's log files. So the interpreter, torch and the device context start
once per runner, not once per stage. A program without a `main()` is run
whole (runpy, as __main__) for each stage. The stage's exit code is main()'s
return value (None is 0), a SystemExit's code, or 1 with the traceback on
stderr when it raises.

A program that crashes or hangs the interpreter takes this process down (or
the board kills it): that is the isolation boundary, and the board starts a
fresh runner. The board gives each runner one program (Python cannot unload
a module), so two packages' same-named modules never mix.

Exits when the board closes the socket; the board arms PR_SET_PDEATHSIG
before exec, so it also dies with the board.
"""
import importlib.util
import os
import runpy
import struct
import sys
import traceback

CONTROL_FD = 3
MAX_PARTS = 4096
MAX_PART_BYTES = 1 << 20


def read_exact(n):
    buf = b""
    while len(buf) < n:
        chunk = os.read(CONTROL_FD, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def read_frame():
    head = read_exact(4)
    if head is None:
        return None
    (count,) = struct.unpack("<I", head)
    if count > MAX_PARTS:
        return None
    parts = []
    for _ in range(count):
        size = read_exact(4)
        if size is None:
            return None
        (length,) = struct.unpack("<I", size)
        if length > MAX_PART_BYTES:
            return None
        data = read_exact(length) if length else b""
        if data is None:
            return None
        parts.append(os.fsdecode(data))
    return parts


def write_frame(parts):
    out = [struct.pack("<I", len(parts))]
    for p in parts:
        b = os.fsencode(p)
        out.append(struct.pack("<I", len(b)))
        out.append(b)
    data = b"".join(out)
    while data:
        n = os.write(CONTROL_FD, data)
        data = data[n:]


def exit_code(value):
    """A SystemExit's or main()'s value as a process exit code."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value & 0xFF
    sys.stderr.write("%s\n" % (value,))
    return 1


class Program:
    """One operator program: imported at the first stage that needs it."""

    def __init__(self, path):
        self.path = path
        self.module = None

    def run(self, argv):
        sys.argv = list(argv)
        try:
            if self.module is None:
                folder = os.path.dirname(os.path.abspath(self.path))
                if folder not in sys.path:
                    sys.path.insert(0, folder)
                spec = importlib.util.spec_from_file_location(
                    "tunefarm_program", self.path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                self.module = module
            main = getattr(self.module, "main", None)
            if callable(main):
                return exit_code(main())
            runpy.run_path(self.path, run_name="__main__")
            return 0
        except SystemExit as e:
            return exit_code(e.code)
        except BaseException:  # the stage's failure, reported as a process's
            traceback.print_exc()
            return 1


def serve():
    if os.getppid() == 1:  # the board died before PDEATHSIG was armed
        return 0
    saved_out, saved_err = os.dup(1), os.dup(2)
    programs = {}
    while True:
        req = read_frame()
        if req is None:
            return 0
        if len(req) < 5:
            write_frame(["error", "malformed request"])
            continue
        path, cwd, out_path, err_path, argv = req[0], req[1], req[2], req[3], req[4:]
        if not os.path.isfile(path):
            write_frame(["error", "cannot load %s: not a file" % path])
            continue
        try:
            if cwd:
                os.chdir(cwd)
            out_fd = os.open(out_path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            err_fd = os.open(err_path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as e:
            write_frame(["error", "cannot prepare the stage (%s): %s" % (cwd, e)])
            continue
        program = programs.setdefault(path, Program(path))
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.close(out_fd)
        os.close(err_fd)
        code = program.run(argv)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        write_frame(["exit", str(code)])


if __name__ == "__main__":
    sys.exit(serve())
