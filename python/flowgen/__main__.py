"""python -m flowgen: the bundled flowgen command, with the same arguments,
output and exit code."""
import os
import sys


def main():
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flowgen")
    try:
        os.execv(binary, [binary] + sys.argv[1:])
    except OSError as e:
        sys.exit(f"flowgen: cannot run {binary}: {e.strerror} (install the package with "
                 "`pip install .`)")


if __name__ == "__main__":
    main()

