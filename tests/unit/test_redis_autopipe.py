"""Auto-pipelining on redis-py's public API (broker.stores.redis_autopipe), against a real Redis and
against small scripted servers.

The calls of one event-loop turn must share one pipeline and each still get exactly its own
replies (error replies in their place); a caller that gives up must leave the connection in step;
a fault of the batch must reach every caller in it, each with an exception of its own; and a
timed-out batch must never leave a late reply to be read as the answer to the next command.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import BusyLoadingError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError

from broker.stores.redis_autopipe import AutoPipeline
from broker.stores.redis_transport import StockTransport
from broker.taxonomy import StoreUnavailableError
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
async def single() -> AsyncIterator[Redis]:
    """A client whose pool holds one connection: two batches in flight at once would fail."""
    redis_client = await connected_redis(max_connections=1)
    yield redis_client
    await redis_client.aclose()


@pytest.fixture
async def prefix(client: Redis) -> AsyncIterator[str]:
    name = f"test-autopipe-{secrets.token_hex(6)}"
    yield name
    await forget_prefix(client, name)


@pytest.mark.redis
async def test_values_and_script_arguments_arrive_byte_for_byte(client: Redis, prefix: str) -> None:
    batches = AutoPipeline(client, timeout=5)
    for i, value in enumerate(ODD_VALUES):
        key = f"{prefix}:{{t}}:v{i}"
        assert await batches.exchange(("SET", key, value), ("GET", key)) == [b"OK", value]
    echoed = await batches.exchange(("EVAL", "return ARGV", 0, *ODD_VALUES, 7, "1.25"))
    assert echoed == [[*ODD_VALUES, b"7", b"1.25"]]


@pytest.mark.redis
async def test_calls_of_one_turn_share_one_pipeline_and_each_gets_its_own_replies(
    single: Redis, prefix: str
) -> None:
    batches = AutoPipeline(single, timeout=5)
    keys = [f"{prefix}:{{t}}:k{i}" for i in range(20)]
    answers = await asyncio.gather(
        *(batches.exchange(("SET", key, f"v{i}"), ("GET", key)) for i, key in enumerate(keys)),
        batches.exchange(("HGET", keys[0], "f"), ("GET", keys[0])),
    )
    assert answers[:20] == [[b"OK", f"v{i}".encode()] for i in range(20)]
    wrong, value = answers[20]
    assert isinstance(wrong, ResponseError) and "WRONGTYPE" in str(wrong)
    assert value == b"v0"
    # With one connection in the pool, a second batch in flight would have raised
    # MaxConnectionsError: the 21 calls went as one pipeline. And the connection is in step:
    assert await batches.exchange(("GET", keys[1])) == [b"v1"]


@pytest.mark.redis
async def test_calls_of_later_turns_go_in_later_batches(single: Redis) -> None:
    batches = AutoPipeline(single, timeout=5)
    first = batches.exchange(("ECHO", "one"))
    assert await first == [b"one"]
    assert await batches.exchange(("ECHO", "two")) == [b"two"]


@pytest.mark.redis
async def test_a_caller_that_gives_up_leaves_the_connection_in_step(
    single: Redis, prefix: str
) -> None:
    batches = AutoPipeline(single, timeout=5)
    key = f"{prefix}:{{t}}:slow"
    # The first caller's command (a blocking pop that waits 0.2 s) is written; it gives up.
    gone = batches.exchange(("BLPOP", key, "0.2"))
    kept = batches.exchange(("ECHO", "kept"))
    await asyncio.sleep(0.05)
    gone.cancel()
    assert await kept == [b"kept"]  # its batch was read to the end all the same
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert await batches.exchange(("ECHO", "next")) == [b"next"]  # no reply left behind


@pytest.mark.redis
async def test_a_caller_that_gives_up_before_the_write_sends_nothing(
    client: Redis, prefix: str
) -> None:
    batches = AutoPipeline(client, timeout=5)
    key = f"{prefix}:{{t}}:never"
    gone = batches.exchange(("SET", key, "v"))  # queued, not yet written
    gone.cancel()
    assert await batches.exchange(("EXISTS", key)) == [0]


# -- scripted servers ----------------------------------------------------------------------------


class _Server:
    """Reads RESP commands and answers each (but the handshake's) with what ``answer`` says
    (``None``: hang up)."""

    def __init__(self, answer: Callable[[int, list[bytes]], Awaitable[bytes | None]]) -> None:
        self.answer = answer
        self.connections = 0
        self.hung_up = asyncio.Event()
        self._handlers: list[asyncio.Event] = []
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    def drop_first(self) -> None:
        """Close the first connection from the server's side."""
        self._writers[0].close()

    async def __aenter__(self) -> Redis:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        # protocol 2, no retries; no socket_timeout: the batch's deadline is the bound
        pool = ConnectionPool(port=port, protocol=2, retry=Retry(NoBackoff(), 0))
        self.client = Redis.from_pool(pool)
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()
        assert self._server is not None
        self._server.close()
        for done in self._handlers:
            await asyncio.wait_for(done.wait(), 1)
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        self._writers.append(writer)
        done = asyncio.Event()
        self._handlers.append(done)
        try:
            while header := await reader.readline():  # "*N", then "$len" and the bytes, N times
                command = []
                for _ in range(int(header[1:])):
                    size = int((await reader.readline())[1:])
                    command.append((await reader.readexactly(size + 2))[:-2])
                if command[0].upper() in (b"CLIENT", b"HELLO", b"AUTH", b"SELECT"):
                    writer.write(b"+OK\r\n")  # redis-py's handshake
                    continue
                reply = await self.answer(number, command)
                if reply is None:
                    break
                writer.write(reply)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.hung_up.set()
            writer.close()
            done.set()


async def test_a_timed_out_batch_fails_every_caller_and_drops_its_connection() -> None:
    async def late_on_the_first_connection(connection: int, _: list[bytes]) -> bytes:
        if connection == 1:
            await asyncio.sleep(0.3)
        return b"+PONG\r\n"

    server = _Server(late_on_the_first_connection)
    async with server as client:
        batches = AutoPipeline(client, timeout=0.1)
        faults = await asyncio.gather(
            batches.exchange(("PING",)), batches.exchange(("PING",)), return_exceptions=True
        )
        assert [type(fault) for fault in faults] == [TimeoutError, TimeoutError]
        assert faults[0] is not faults[1]  # each caller raises an exception of its own
        await asyncio.wait_for(server.hung_up.wait(), 1)  # closed before its late +PONG
        await asyncio.sleep(0.4)  # the late reply would have arrived by now
        assert await batches.exchange(("PING",)) == [b"PONG"]
        assert server.connections == 2  # on a new connection


async def test_a_connection_closed_mid_batch_fails_every_caller_of_the_batch() -> None:
    async def hang_up(connection: int, _: list[bytes]) -> bytes | None:
        return None if connection == 1 else b"+PONG\r\n"

    server = _Server(hang_up)
    async with server as client:
        batches = AutoPipeline(client, timeout=2)
        faults = await asyncio.gather(
            batches.exchange(("PING",)), batches.exchange(("PING",)), return_exceptions=True
        )
        assert all(isinstance(fault, RedisConnectionError) for fault in faults), faults
        assert await batches.exchange(("PING",)) == [b"PONG"]
        assert server.connections == 2  # the broken one was not reused


async def test_a_loading_redis_fails_the_batch_and_its_connection_is_dropped() -> None:
    async def loading_first(connection: int, _: list[bytes]) -> bytes:
        if connection == 1:
            return b"-LOADING Redis is loading the dataset in memory\r\n"
        return b"+PONG\r\n"

    server = _Server(loading_first)
    async with server as client:
        batches = AutoPipeline(client, timeout=2)
        with pytest.raises(BusyLoadingError):
            await batches.exchange(("PING",))
        assert await batches.exchange(("PING",)) == [b"PONG"]
        assert server.connections == 2


async def test_a_reply_nobody_asked_for_is_never_read_as_the_next_answer() -> None:
    async def one_too_many(connection: int, _: list[bytes]) -> bytes:
        return b"+PONG\r\n+EXTRA\r\n" if connection == 1 else b"+PONG\r\n"

    server = _Server(one_too_many)
    async with server as client:
        batches = AutoPipeline(client, timeout=2)
        assert await batches.exchange(("PING",)) == [b"PONG"]
        await asyncio.sleep(0.05)  # the extra reply has arrived
        # redis-py's pool finds data waiting on the connection and reconnects before lending it
        assert await batches.exchange(("PING",)) == [b"PONG"]
        assert server.connections == 2


async def test_a_kept_connection_the_server_closed_is_replaced_before_the_next_batch() -> None:
    """Connections stay with the batcher between batches: one the server closed meanwhile (a
    restart, an idle timeout) is reconnected before it is written to, not reported as a fault."""

    async def hang_up_after_answering(connection: int, _: list[bytes]) -> bytes:
        if connection == 1:
            asyncio.get_running_loop().call_soon(server.drop_first)
        return b"+PONG\r\n"

    server = _Server(hang_up_after_answering)
    async with server as client:
        batches = AutoPipeline(client, timeout=2)
        assert await batches.exchange(("PING",)) == [b"PONG"]
        await asyncio.wait_for(server.hung_up.wait(), 1)
        assert await batches.exchange(("PING",)) == [b"PONG"]
        assert server.connections == 2
        await batches.close()


async def test_the_stock_transport_never_resends_even_on_a_client_with_retries() -> None:
    """The store's own client copies the given client's settings but not its retries: a batch
    cut off mid-flight is reported, not sent again (a script could run twice)."""
    gets = 0

    async def hang_up_first(connection: int, _: list[bytes]) -> bytes | None:
        nonlocal gets
        gets += 1
        return None if connection == 1 else b"$1\r\nv\r\n"

    server = _Server(hang_up_first)
    async with server as given:
        settings = given.connection_pool.connection_kwargs
        client = Redis(port=settings["port"], protocol=2, socket_timeout=2)  # default retries
        transport = StockTransport(client, {})
        try:
            with pytest.raises(StoreUnavailableError, match="ConnectionError"):
                await transport.get("k")
            assert gets == 1
        finally:
            await transport.close()
            await client.aclose()
