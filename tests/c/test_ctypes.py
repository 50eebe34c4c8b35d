"""The C ABI from another FFI runtime: Python ctypes loads liblagless.so (no compiled glue),
produces records, and consumes them in a group with a rebalance listener made of CFUNCTYPE
callbacks, which must run on the polling (this) thread.

Needs LAGLESS_BOOTSTRAP (host:port of a live broker). The library is LAGLESS_LIB, else
target/release/liblagless.so.
"""
import ctypes as C
import os
import threading
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bootstrap():
    b = os.environ.get("LAGLESS_BOOTSTRAP")
    if not b:
        pytest.fail("LAGLESS_BOOTSTRAP is not set: it must name a live Kafka broker (host:port)")
    return b


def _load():
    path = os.environ.get("LAGLESS_LIB") or str(ROOT / "target" / "release" / "liblagless.so")
    if not Path(path).exists():
        pytest.fail(f"{path} does not exist: build it with `cargo build --release -p lagless-ffi` or set LAGLESS_LIB")
    lib = C.CDLL(path)
    P = C.c_void_p
    sigs = {
        "lagless_version": (C.c_char_p, []),
        "lagless_error_code": (C.c_int32, [P]),
        "lagless_error_message": (C.c_char_p, [P]),
        "lagless_error_destroy": (None, [P]),
        "lagless_config_new": (P, []),
        "lagless_config_set": (P, [P, C.c_char_p, C.c_char_p]),
        "lagless_config_destroy": (None, [P]),
        "lagless_admin_create_topic": (P, [C.c_char_p, C.c_char_p, C.c_int32, C.c_int16]),
        "lagless_producer_new": (P, [P, C.POINTER(P)]),
        "lagless_producer_send_sync": (P, [P, C.c_char_p, C.c_int32, C.c_char_p, C.c_size_t,
                                           C.c_char_p, C.c_size_t, C.POINTER(C.c_int32),
                                           C.POINTER(C.c_int64)]),
        "lagless_producer_close": (P, [P, C.c_int32]),
        "lagless_producer_destroy": (None, [P]),
        "lagless_consumer_new": (P, [P, C.POINTER(P)]),
        "lagless_consumer_subscribe": (P, [P, C.POINTER(C.c_char_p), C.c_size_t, P]),
        "lagless_consumer_poll_batch": (P, [P, C.c_int32, C.POINTER(P), C.c_size_t,
                                            C.POINTER(C.c_size_t)]),
        "lagless_consumer_commit_sync": (P, [P, P, C.c_int32]),
        "lagless_consumer_close": (P, [P, C.c_int32]),
        "lagless_consumer_destroy": (None, [P]),
        "lagless_message_partition": (C.c_int32, [P]),
        "lagless_message_offset": (C.c_int64, [P]),
        "lagless_message_value": (P, [P, C.POINTER(C.c_size_t)]),
        "lagless_message_destroy": (None, [P]),
        "lagless_tplist_count": (C.c_size_t, [P]),
        "lagless_tplist_get": (P, [P, C.c_size_t, C.POINTER(C.c_char_p), C.POINTER(C.c_int32),
                                   C.POINTER(C.c_int64)]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib


REBALANCE_CB = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p, C.c_void_p)


class Listener(C.Structure):
    _fields_ = [("opaque", C.c_void_p), ("on_assigned", REBALANCE_CB),
                ("on_revoked", REBALANCE_CB), ("on_lost", REBALANCE_CB)]


def _ok(lib, err):
    if err:
        msg = lib.lagless_error_message(err).decode()
        code = lib.lagless_error_code(err)
        lib.lagless_error_destroy(err)
        raise AssertionError(f"lagless error {code}: {msg}")


def _config(lib, pairs):
    cfg = lib.lagless_config_new()
    for k, v in pairs.items():
        _ok(lib, lib.lagless_config_set(cfg, k.encode(), v.encode()))
    return cfg


def test_consumes_through_the_c_abi_with_a_rebalance_callback():
    bootstrap = _bootstrap()
    lib = _load()
    assert lib.lagless_version().decode() == "0.1.0"
    run = uuid.uuid4().hex[:8]
    topic, group = f"lagless-ctypes-{run}", f"lagless-ctypes-g-{run}"
    _ok(lib, lib.lagless_admin_create_topic(bootstrap.encode(), topic.encode(), 2, 1))

    cfg = _config(lib, {"bootstrap.servers": bootstrap})
    prod = C.c_void_p()
    _ok(lib, lib.lagless_producer_new(cfg, C.byref(prod)))
    lib.lagless_config_destroy(cfg)
    n = 50
    for i in range(n):
        v = f"value-{i}".encode()
        _ok(lib, lib.lagless_producer_send_sync(prod, topic.encode(), i % 2, None, 0, v, len(v), None, None))
    _ok(lib, lib.lagless_producer_close(prod, 5000))
    lib.lagless_producer_destroy(prod)

    events = []
    poller = threading.get_ident()

    def partitions(tplist):
        out = []
        for i in range(lib.lagless_tplist_count(tplist)):
            t, p = C.c_char_p(), C.c_int32()
            _ok(lib, lib.lagless_tplist_get(tplist, i, C.byref(t), C.byref(p), None))
            out.append((t.value.decode(), p.value))
        return out

    def on_assigned(_opaque, _consumer, tplist):
        events.append(("assigned", threading.get_ident(), partitions(tplist)))
        return 0

    def on_revoked(_opaque, _consumer, tplist):
        events.append(("revoked", threading.get_ident(), partitions(tplist)))
        return 0

    # Keep the CFUNCTYPE objects alive as long as the consumer may call them.
    listener = Listener(None, REBALANCE_CB(on_assigned), REBALANCE_CB(on_revoked), REBALANCE_CB(0))
    cfg = _config(lib, {"bootstrap.servers": bootstrap, "group.id": group,
                        "auto.offset.reset": "earliest"})
    cons = C.c_void_p()
    _ok(lib, lib.lagless_consumer_new(cfg, C.byref(cons)))
    lib.lagless_config_destroy(cfg)
    topics = (C.c_char_p * 1)(topic.encode())
    _ok(lib, lib.lagless_consumer_subscribe(cons, topics, 1, C.cast(C.pointer(listener), C.c_void_p)))

    seen = {}
    batch = (C.c_void_p * 32)()
    count = C.c_size_t()
    deadline = time.monotonic() + 60
    while len(seen) < n and time.monotonic() < deadline:
        _ok(lib, lib.lagless_consumer_poll_batch(cons, 200, batch, 32, C.byref(count)))
        for i in range(count.value):
            m = batch[i]
            ln = C.c_size_t()
            ptr = lib.lagless_message_value(m, C.byref(ln))
            value = C.string_at(ptr, ln.value).decode()
            seen[(lib.lagless_message_partition(m), lib.lagless_message_offset(m))] = value
            lib.lagless_message_destroy(m)
    _ok(lib, lib.lagless_consumer_commit_sync(cons, None, 10000))
    _ok(lib, lib.lagless_consumer_close(cons, 10000))
    lib.lagless_consumer_destroy(cons)

    assert sorted(seen.values()) == sorted(f"value-{i}" for i in range(n))
    assert events[0][0] == "assigned"
    assert sorted(events[0][2]) == [(topic, 0), (topic, 1)]
    # close revoked what was assigned; every callback ran on this thread.
    assert events[-1][0] == "revoked" and sorted(events[-1][2]) == [(topic, 0), (topic, 1)]
    assert all(tid == poller for _, tid, _ in events)
