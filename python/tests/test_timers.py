"""The idem package's time calls (docs/state.md, "Time and timers"): event
time and stream time, timers set, cancelled, found and fired through a
Python handler (its failures included), values that expire, and the errors
of each call."""

import datetime
import time

import idem
import pytest

# An event time well behind the engine's clock (the clock bounds how far
# ahead one may advance stream time).
BASE = 1_600_000_000.0
UTC = datetime.timezone.utc
EVENT = idem.TimeDomain.EVENT
PROCESSING = idem.TimeDomain.PROCESSING


def process_event(engine, id, handler, event_time=BASE, **kwargs):
    return engine.process(id, handler, source="events",
                          event_time=event_time, **kwargs)


def set_timer(key, domain, fire_at, payload=b""):
    def handler(txn, message):
        txn.set_timer(key, domain, fire_at, payload)
    return handler


class Recorder:
    """A timer handler that writes fired/<key> = payload, emits to
    "closed", and raises what it is told to."""

    def __init__(self, raise_=None):
        self.fires = []
        self.stream_times = []
        self.raise_ = raise_
        self.kept = None

    def __call__(self, txn, timer):
        self.fires.append(timer)
        self.stream_times.append(txn.stream_time)
        txn.put(b"fired/" + timer.timer_key, timer.payload)
        txn.emit("closed", timer.timer_key, timer.payload)
        self.kept = txn
        if self.raise_ is not None:
            raise self.raise_


def fire(engine, domain, handler, up_to=None, max=10):
    return engine.fire_timers("events", 0, domain, up_to, max, handler)


def test_event_time_advances_the_stream_time_handlers_and_engine_see(engine):
    assert engine.stream_time("events") is None
    seen = []

    def handler(txn, message):
        seen.append((message.event_time, txn.stream_time))

    process_event(engine, "a", handler)
    assert seen == [(BASE, BASE)]
    assert engine.stream_time("events", 0) == BASE
    # A datetime is its timestamp; an earlier event time leaves stream time.
    earlier = datetime.datetime.fromtimestamp(BASE - 5, UTC)
    process_event(engine, "b", handler, event_time=earlier)
    assert seen[-1] == (BASE - 5, BASE)
    process_event(engine, "c", handler, event_time=None)
    assert seen[-1] == (None, BASE)
    assert idem.Message("m", event_time=BASE + 0.25).event_time == BASE + 0.25
    assert idem.Message("m").event_time is None


def test_bad_event_times_raise(engine):
    ran = []
    with pytest.raises(idem.InvalidArgument):
        process_event(engine, "inf", lambda t, m: ran.append(m),
                      event_time=float("inf"))
    with pytest.raises(idem.InvalidArgument):
        idem.Message("nan", event_time=float("nan"))
    with pytest.raises(idem.InvalidArgument):
        idem.Message("far", event_time=1e300)
    with pytest.raises(TypeError):
        idem.Message("str", event_time="yesterday")
    with pytest.raises(TypeError):
        idem.Message("bool", event_time=True)
    assert ran == []
    with pytest.raises(idem.InvalidArgument):
        engine.stream_time("events", -1)
    with pytest.raises(idem.InvalidArgument):
        engine.stream_time("")


def test_event_timer_fires_once_stream_time_reaches_it(engine):
    fire_at = BASE + 10
    process_event(engine, "set", set_timer("w", EVENT, fire_at, b"p"))
    assert engine.next_timer("events", 0, EVENT) == idem.TimerFire(
        "events", 0, EVENT, b"w", fire_at, b"p")
    assert engine.next_timer("events", 0, PROCESSING) is None
    recorder = Recorder()
    assert fire(engine, EVENT, recorder) == 0  # stream time is BASE
    process_event(engine, "late", lambda t, m: None, event_time=fire_at)
    assert fire(engine, EVENT, recorder, up_to=fire_at - 1) == 0
    assert fire(engine, EVENT, recorder,
                up_to=datetime.datetime.fromtimestamp(fire_at, UTC)) == 1
    assert [f.timer_key for f in recorder.fires] == [b"w"]
    assert recorder.fires[0].fire_at == fire_at
    assert recorder.stream_times == [fire_at]
    assert engine.get_state("fired/w") == b"p"
    [entry] = engine.read_outbox()
    assert (entry.destination, entry.key, entry.value) == ("closed", b"w",
                                                           b"p")
    # Fired once: gone.
    assert fire(engine, EVENT, recorder) == 0
    assert engine.next_timer("events", 0, EVENT) is None
    assert engine.stats().timers_fired == 1
    # The txn is dead once its handler returned.
    with pytest.raises(idem.FailedPrecondition):
        recorder.kept.put("x", b"1")


def test_processing_timer_fires_by_the_clock_and_a_cancelled_one_never(
        engine):
    def handler(txn, message):
        txn.set_timer("a", PROCESSING, BASE)
        txn.set_timer(b"b", PROCESSING, BASE, b"x")
        txn.cancel_timer("b")
        txn.cancel_timer("never-set")

    process_event(engine, "set", handler, event_time=None)
    recorder = Recorder()
    assert fire(engine, EVENT, recorder) == 0
    assert fire(engine, PROCESSING, recorder, max=1) == 1
    assert [f.timer_key for f in recorder.fires] == [b"a"]
    assert recorder.fires[0].domain == PROCESSING
    assert engine.next_timer("events", 0, PROCESSING) is None


def test_set_timer_refuses_bad_times_and_types(engine):
    raised = []

    def bad(call):
        def handler(txn, message):
            txn.put("written", b"1")
            try:
                call(txn)
            except Exception as e:  # noqa: BLE001 - recorded for the test
                raised.append(type(e))
        return handler

    # Infinite (or missing) times fail the message even if the handler goes
    # on.
    for i, fire_at in enumerate((float("inf"), float("-inf"), None)):
        result = process_event(
            engine, f"inf-{i}",
            bad(lambda txn, at=fire_at: txn.set_timer("t", EVENT, at)))
        assert result.outcome == idem.Outcome.FAILED
    assert engine.get_state("written") is None
    assert raised == [idem.InvalidArgument] * 3
    raised.clear()
    # Refused by the call alone.
    process_event(engine, "types", bad(
        lambda txn: txn.set_timer("t", 7, BASE + 1)))
    process_event(engine, "key", bad(
        lambda txn: txn.set_timer(42, EVENT, BASE + 1)))
    process_event(engine, "nan", bad(
        lambda txn: txn.set_timer("t", EVENT, float("nan"))))
    assert raised == [TypeError, TypeError, idem.InvalidArgument]
    raised.clear()
    # At or below stream time: OutOfRange, the message unaffected.
    result = process_event(engine, "past", bad(
        lambda txn: txn.set_timer("t", EVENT, BASE)))
    assert result.outcome == idem.Outcome.PROCESSED
    assert raised == [idem.OutOfRange]
    assert engine.next_timer("events", 0, EVENT) is None


def test_timers_need_a_message_with_a_source(engine):
    raised = []

    def handler(txn, message):
        assert txn.stream_time is None
        for call in (lambda: txn.set_timer("t", PROCESSING, BASE),
                     lambda: txn.cancel_timer("t")):
            with pytest.raises(idem.FailedPrecondition):
                call()
            raised.append(True)

    assert engine.process("no-source", handler).outcome == \
        idem.Outcome.PROCESSED
    assert raised == [True, True]


def test_fire_timers_refuses_bad_input(engine):
    recorder = Recorder()
    with pytest.raises(idem.InvalidArgument):
        fire(engine, EVENT, recorder, max=0)
    with pytest.raises(idem.InvalidArgument):
        fire(engine, EVENT, recorder, max=-1)
    with pytest.raises(TypeError):
        fire(engine, 7, recorder)
    with pytest.raises(TypeError):
        fire(engine, EVENT, "not callable")
    with pytest.raises(idem.InvalidArgument):
        engine.fire_timers("", 0, EVENT, None, 10, recorder)
    with pytest.raises(idem.InvalidArgument):
        engine.fire_timers("events", -1, EVENT, None, 10, recorder)
    with pytest.raises(TypeError):
        engine.next_timer("events", 0, "event")
    inside = []

    def fires_inside(txn, message):
        with pytest.raises(idem.FailedPrecondition):
            fire(engine, EVENT, recorder)
        inside.append(True)

    engine.process("inside", fires_inside)
    assert inside == [True]
    engine.close()
    with pytest.raises(idem.FailedPrecondition):
        fire(engine, EVENT, recorder)
    with pytest.raises(idem.FailedPrecondition):
        engine.next_timer("events", 0, EVENT)
    with pytest.raises(idem.FailedPrecondition):
        engine.stream_time("events", 0)
    assert recorder.fires == []


def test_a_raising_timer_handler_keeps_the_timer_and_reraises(engine):
    process_event(engine, "set", set_timer("a", PROCESSING, BASE, b"v"))
    error = ValueError("not now")
    recorder = Recorder(raise_=error)
    with pytest.raises(ValueError) as raised:
        fire(engine, PROCESSING, recorder)
    assert raised.value is error
    assert engine.get_state("fired/a") is None
    assert engine.read_outbox() == []
    assert engine.next_timer("events", 0, PROCESSING).timer_key == b"a"
    assert engine.stats().timer_failures == 1
    # It fires on a later call.
    recorder.raise_ = None
    assert fire(engine, PROCESSING, recorder) == 1
    assert engine.get_state("fired/a") == b"v"


def test_permanent_timer_failure_dead_letters_the_timer(engine):
    process_event(engine, "set", set_timer("a", PROCESSING, BASE))
    process_event(engine, "set-b", set_timer("b", PROCESSING, BASE + 1))
    recorder = Recorder(raise_=idem.PermanentError(ValueError("never")))
    assert fire(engine, PROCESSING, recorder) == 2
    assert engine.get_state("fired/a") is None
    assert engine.read_outbox() == []
    assert engine.next_timer("events", 0, PROCESSING) is None
    stats = engine.stats()
    assert (stats.timers_fired, stats.timers_dead_lettered) == (2, 2)


def test_keyboard_interrupt_in_a_timer_handler_keeps_it(engine):
    process_event(engine, "set", set_timer("a", PROCESSING, BASE))
    with pytest.raises(KeyboardInterrupt):
        fire(engine, PROCESSING, Recorder(raise_=KeyboardInterrupt()))
    assert engine.get_state("fired/a") is None
    assert fire(engine, PROCESSING, Recorder()) == 1
    assert engine.get_state("fired/a") == b""


def test_put_with_ttl_expires_and_bad_ttls_fail_the_message(engine):
    def handler(txn, message):
        txn.put("short", b"s", ttl=0.001)
        txn.put("long", b"l", ttl=datetime.timedelta(hours=1))
        txn.put("plain", b"p", ttl=None)

    engine.process("put", handler)
    time.sleep(0.02)
    assert engine.get_state("short") is None
    assert engine.get_state("long") == b"l"
    assert engine.get_state("plain") == b"p"
    for i, ttl in enumerate((0, -1)):
        def bad(txn, message, ttl=ttl):
            with pytest.raises(idem.InvalidArgument):
                txn.put("bad", b"x", ttl=ttl)
        result = engine.process(f"bad-{i}", bad)
        assert result.outcome == idem.Outcome.FAILED
    raised = []

    def wrong_type(txn, message):
        with pytest.raises(TypeError):
            txn.put("bad", b"x", ttl="1s")
        raised.append(True)

    assert engine.process("type", wrong_type).outcome == \
        idem.Outcome.PROCESSED
    assert raised == [True]
    assert engine.get_state("bad") is None


def test_state_ttl_expires_every_write(store):
    for bad in (0, -1, datetime.timedelta(0)):
        with pytest.raises(idem.InvalidArgument):
            idem.Engine.open(store, state_ttl=bad)
    with pytest.raises(TypeError):
        idem.Engine.open(store, state_ttl="1s")
    with idem.Engine.open(store, state_ttl=0.001) as engine:
        engine.process("a", lambda txn, m: txn.put("k", b"v"))
        time.sleep(0.02)
        assert engine.get_state("k") is None
    # None: no TTL, on the same store.
    with idem.Engine.open(store) as engine:
        engine.process("b", lambda txn, m: txn.put("k", b"v"))
        time.sleep(0.02)
        assert engine.get_state("k") == b"v"


def test_c_api_minor_names_the_time_calls():
    assert idem.C_API_MINOR >= 1
