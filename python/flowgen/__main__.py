"""python -m flowgen: the bundled flowgen command, with the same arguments,
output and exit code (from a source tree, where nothing is bundled:
$FLOWGEN_BIN, as the C tests name the binary)."""
import os
import sys


def main():
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flowgen")
    if not os.path.exists(binary) and os.environ.get("FLOWGEN_BIN"):
        binary = os.environ["FLOWGEN_BIN"]
    try:
        os.execv(binary, [binary] + sys.argv[1:])
    except OSError as e:
        sys.exit(f"flowgen: cannot run {binary}: {e.strerror} (install the package with "
                 "`pip install .`)")


if __name__ == "__main__":
    main()

