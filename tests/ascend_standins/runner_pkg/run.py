"""A real Python operator program for the ascend board's persistent runner
tests: the stage contract of ops/ascend_matmul/run.py, answered by the
stand-in (../_standin_program.py) instead of an NPU. Its `main()` is what the
runner calls for each stage; run as a script it is one stage."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _standin_program  # noqa: E402


def main():
    return _standin_program.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
