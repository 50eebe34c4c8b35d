"""The core's log events reach Python's logging as a user configures it: a broker that cannot
be reached is warned of at the default setup, and the ``lagless`` logger's level is followed
whenever it is set, after ``import lagless`` too. No broker needed: nothing listens on
127.0.0.1:1. Each case runs in a fresh interpreter, so that the logging setup is its own."""

import subprocess
import sys
import textwrap

UNREACHABLE = textwrap.dedent(
    """
    import logging, sys, time
    import lagless
    {setup}
    c = lagless.Consumer({{"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                          "reconnect.backoff.ms": "50", "reconnect.backoff.max.ms": "200"}})
    c.subscribe(["t"])
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        c.poll(0.2)
    c.close(0.5)
    """
)


def run(setup: str) -> str:
    """Runs a consumer of an unreachable cluster for 2 s after `setup`; its stderr."""
    done = subprocess.run(
        [sys.executable, "-c", UNREACHABLE.format(setup=setup)],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_an_unreachable_broker_is_warned_of_once_with_no_logging_setup():
    # Nothing configured: Python's last-resort handler prints WARNING and above.
    err = run("")
    lines = err.splitlines()
    all_down = [l for l in lines if "all brokers are down" in l]
    warnings = [l for l in lines if "cannot connect to broker 127.0.0.1:1" in l and l not in all_down]
    assert len(warnings) == 1, err
    assert "refused" in warnings[0].lower(), warnings
    # The whole-cluster condition (what error_cb gets) is logged at ERROR once too, naming the
    # last address and cause.
    assert len(all_down) == 1, err
    assert "127.0.0.1:1" in all_down[0], all_down
    assert "(retrying)" not in err, "DEBUG lines printed at the default level"


def test_the_loggers_level_set_after_import_is_followed():
    # Set after import: the core forwards DEBUG from then on (the retries are DEBUG lines).
    err = run(
        'h = logging.StreamHandler(); h.setFormatter(logging.Formatter("%(levelname)s %(message)s"))\n'
        'logging.getLogger("lagless").addHandler(h)\n'
        'logging.getLogger("lagless").setLevel(logging.DEBUG)'
    )
    debug = [l for l in err.splitlines() if l.startswith("DEBUG ") and "(retrying)" in l]
    assert len(debug) >= 2, err


def test_a_root_level_set_by_basic_config_after_import_is_followed():
    err = run('logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s %(message)s")')
    debug = [l for l in err.splitlines() if l.startswith("DEBUG lagless ") and "(retrying)" in l]
    assert len(debug) >= 2, err
