"""The `lagless` console script: the command-line tool of the Rust crate lagless-cli, run in
this process (see the repository's README, "Operating lagless")."""
import signal
import sys

from lagless import _lagless


def main() -> None:
    # As the native binary: Ctrl-C ends the tool at once (Python's handler would only run
    # after the tool returned). A closed pipe (`| head`) is the tool's to handle: it stops
    # quietly.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(_lagless.run_cli(["lagless", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
