"""The store's own Redis connections (broker.stores.redis_wire) against a real Redis.

Arguments must reach Redis byte for byte, a pipeline's error replies must come back in their
place with the connection still in step, exchanges started together must share one write and
still each get exactly their own replies, and a timed-out exchange must never leave a late reply
to be read as the answer to the next command.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import BusyLoadingError, InvalidResponse, MaxConnectionsError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError

from broker.stores.redis_wire import Wire
from tests.redis_helpers import connected_redis, forget_prefix

ODD_VALUES = [
    b"",
    b"\r\n",
    b"$3\r\nSET\r\n",
    b"\x00\xff\xfe",
    "tenant é ü".encode(),
    b"x" * 200_000,
]


@pytest.fixture
async def client() -> AsyncIterator[Redis]:
    redis_client = await connected_redis()  # skips when no Redis answers
    yield redis_client
    await redis_client.aclose()


@pytest.fixture
async def wire(client: Redis) -> AsyncIterator[Wire]:
    on_client = Wire(client.connection_pool)
    yield on_client
    await on_client.close()


@pytest.fixture
async def prefix(client: Redis) -> AsyncIterator[str]:
    name = f"test-wire-{secrets.token_hex(6)}"
    yield name
    await forget_prefix(client, name)


@pytest.mark.redis
async def test_values_and_script_arguments_arrive_byte_for_byte(
    client: Redis, wire: Wire, prefix: str
) -> None:
    for i, value in enumerate(ODD_VALUES):
        key = f"{prefix}:{{t}}:v{i}"
        assert await wire.exchange(("SET", key, value), ("GET", key)) == [b"OK", value]
        assert await client.get(key) == value  # what redis-py itself reads back
    echoed = await wire.exchange(("EVAL", "return ARGV", 0, *ODD_VALUES, 7, "1.25"))
    assert echoed == [[*ODD_VALUES, b"7", b"1.25"]]


@pytest.mark.redis
async def test_error_replies_come_back_in_their_place(wire: Wire, prefix: str) -> None:
    key = f"{prefix}:{{t}}:s"
    ok, wrong, value = await wire.exchange(("SET", key, "v"), ("HGET", key, "f"), ("GET", key))
    assert ok == b"OK" and value == b"v"
    assert isinstance(wrong, ResponseError) and "WRONGTYPE" in str(wrong)
    assert await wire.exchange(("GET", key)) == [b"v"]  # the connection is still in step


@pytest.mark.redis
async def test_the_client_limit_on_connections_holds(client: Redis) -> None:
    small = Redis(
        connection_pool=type(client.connection_pool)(
            **{**client.connection_pool.connection_kwargs}, max_connections=1
        )
    )
    wire = Wire(small.connection_pool)
    try:
        first = wire.exchange(("PING",))  # queued...
        await asyncio.sleep(0)  # ...and sent on the one connection, awaiting its reply
        with pytest.raises(MaxConnectionsError):
            await wire.exchange(("PING",))
        assert await first == [b"PONG"]
        assert await wire.exchange(("PING",)) == [b"PONG"]  # the one connection came back
    finally:
        await wire.close()
        await small.aclose()


@pytest.mark.redis
async def test_exchanges_of_one_turn_share_one_write_and_each_gets_its_own_replies(
    wire: Wire, prefix: str
) -> None:
    keys = [f"{prefix}:{{t}}:k{i}" for i in range(20)]
    answers = await asyncio.gather(
        *(wire.exchange(("SET", key, f"v{i}"), ("GET", key)) for i, key in enumerate(keys)),
        wire.exchange(("HGET", keys[0], "f"), ("GET", keys[0])),
    )
    assert answers[:20] == [[b"OK", f"v{i}".encode()] for i in range(20)]
    wrong, value = answers[20]
    assert isinstance(wrong, ResponseError) and "WRONGTYPE" in str(wrong)
    assert value == b"v0"
    assert wire.connections == 1  # one batch, one connection


@pytest.mark.redis
async def test_a_caller_that_gives_up_leaves_the_connection_in_step(
    wire: Wire, prefix: str
) -> None:
    key = f"{prefix}:{{t}}:slow"
    # The first caller's command (a blocking pop that waits 0.2 s) is sent; it gives up.
    gone = wire.exchange(("BLPOP", key, "0.2"))
    kept = wire.exchange(("ECHO", "kept"))
    await asyncio.sleep(0.05)
    gone.cancel()
    assert await kept == [b"kept"]  # its batch was read to the end all the same
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert await wire.exchange(("ECHO", "next")) == [b"next"]  # no reply left behind
    assert wire.connections == 1


@pytest.mark.redis
async def test_a_caller_that_gives_up_before_the_write_sends_nothing(
    wire: Wire, prefix: str
) -> None:
    key = f"{prefix}:{{t}}:never"
    gone = wire.exchange(("SET", key, "v"))  # queued, not yet written
    gone.cancel()
    assert await wire.exchange(("EXISTS", key)) == [0]


class _SlowServer:
    """Speaks just enough RESP: answers every command with +PONG, the first one late."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.connections = 0
        self.closed_by_client = asyncio.Event()
        self.handlers: list[asyncio.Event] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        first = self.connections == 1
        done = asyncio.Event()
        self.handlers.append(done)
        try:
            while await reader.readline():  # "*1", then "$4", "PING" per command
                await reader.readline()
                await reader.readline()
                if first:
                    await asyncio.sleep(self.delay_s)
                writer.write(b"+PONG\r\n")
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            if first:
                self.closed_by_client.set()
            writer.close()
            done.set()

    async def finished(self) -> None:
        """Every connection's handler has seen the client go and closed its end."""
        for done in self.handlers:
            await asyncio.wait_for(done.wait(), 1)


async def test_a_timed_out_exchange_drops_its_connection() -> None:
    slow = _SlowServer(delay_s=0.3)
    server = await asyncio.start_server(slow.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = Redis(port=port, socket_timeout=0.1, retry=Retry(NoBackoff(), 0))
    wire = Wire(client.connection_pool)
    try:
        batch = await asyncio.gather(
            wire.exchange(("PING",)), wire.exchange(("PING",)), return_exceptions=True
        )
        assert [type(fault) for fault in batch] == [TimeoutError, TimeoutError]  # all of it
        await asyncio.wait_for(slow.closed_by_client.wait(), 1)  # before its late +PONG
        await asyncio.sleep(0.4)  # the late reply would have arrived by now
        assert await wire.exchange(("PING",)) == [b"PONG"]
        assert slow.connections == 2  # on a new connection
    finally:
        await wire.close()
        await client.aclose()
        await slow.finished()
        server.close()
        await server.wait_closed()


@pytest.mark.redis
async def test_a_connection_lost_while_idle_is_replaced(client: Redis, wire: Wire) -> None:
    (own_id,) = await wire.exchange(("CLIENT", "ID"))
    assert await client.client_kill_filter(_id=str(own_id)) == 1
    for _ in range(100):  # the wire learns of it from the event loop, not from a request
        if wire.connections == 0:
            break
        await asyncio.sleep(0.01)
    assert wire.connections == 0
    assert await wire.exchange(("ECHO", "again")) == [b"again"]
    assert wire.connections == 1


async def test_a_connection_closed_mid_batch_fails_every_caller_of_the_batch() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()  # the first command starts to arrive: go away without a reply
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    # protocol 2 and no client name: redis-py's handshake sends nothing this server must answer
    client = Redis(port=port, socket_timeout=2, retry=Retry(NoBackoff(), 0), protocol=2)
    wire = Wire(client.connection_pool)
    try:
        batch = await asyncio.gather(
            wire.exchange(("PING",)), wire.exchange(("PING",)), return_exceptions=True
        )
        assert all(isinstance(fault, RedisConnectionError) for fault in batch), batch
        assert wire.connections == 0  # dropped, not kept for the next batch
    finally:
        await wire.close()
        await client.aclose()
        server.close()
        await server.wait_closed()


async def _scripted_server(answer: bytes) -> asyncio.Server:
    """Answers every PING it reads with ``answer``, whatever that holds."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readline():  # "*1", then "$4", "PING" per command
                await reader.readline()
                await reader.readline()
                writer.write(answer)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


@pytest.mark.parametrize(
    ("answer", "fault"),
    [
        (b"-LOADING Redis is loading the dataset in memory\r\n", BusyLoadingError),
        (b"+PONG\r\n+PONG\r\n", None),  # one reply too many: out of step
        (b"%%%\r\n", InvalidResponse),
    ],
    ids=["loading", "extra-reply", "garbage"],
)
async def test_a_connection_that_cannot_be_trusted_is_dropped(
    answer: bytes, fault: type[Exception] | None
) -> None:
    server = await _scripted_server(answer)
    port = server.sockets[0].getsockname()[1]
    client = Redis(port=port, socket_timeout=2, retry=Retry(NoBackoff(), 0), protocol=2)
    wire = Wire(client.connection_pool)
    try:
        if fault is None:  # the reply itself is fine; the one after it is nobody's
            assert await wire.exchange(("PING",)) == [b"PONG"]
        else:
            with pytest.raises(fault):
                await wire.exchange(("PING",))
        for _ in range(100):
            if wire.connections == 0:
                break
            await asyncio.sleep(0.01)
        assert wire.connections == 0
    finally:
        await wire.close()
        await client.aclose()
        server.close()
        await server.wait_closed()
