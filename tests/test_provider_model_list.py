"""``OpenAIProvider.list_models``: an OpenAI-compatible server's model list, held to a
deadline and a size, whatever the server does.

Contract (``mainspring.providers.openai``): the ids in the server's order; a server that
never answers is a ``TimeoutError`` after ``timeout_s``; a reply that is not a model list
is a ``ValueError`` saying so; ids that are not short strings are left out.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator

import pytest

from mainspring.providers.openai import OpenAIProvider


def _serve(listener: socket.socket, reply: bytes | None, stop: threading.Event) -> None:
    listener.settimeout(0.05)
    kept: list[socket.socket] = []
    while not stop.is_set():
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            continue
        connection.recv(65536)
        if reply is None:
            kept.append(connection)  # never answers
            continue
        head = f"HTTP/1.1 200 OK\r\ncontent-length: {len(reply)}\r\nconnection: close\r\n\r\n"
        connection.sendall(head.encode() + reply)
        connection.close()
    for connection in kept:
        connection.close()


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[str]:
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    thread = threading.Thread(target=_serve, args=(listener, request.param, stop), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    stop.set()
    thread.join(timeout=10)
    listener.close()


LISTED = json.dumps({"data": [{"id": "b-model"}, {"id": "a-model"}, {"id": 7}, {"id": ""}]})


@pytest.mark.parametrize("server", [LISTED.encode()], indirect=True)
async def test_the_ids_the_server_lists_in_its_order(server: str) -> None:
    listed = await OpenAIProvider(base_url=server).list_models(timeout_s=10)

    assert listed == ["b-model", "a-model"]


@pytest.mark.parametrize("server", [None], indirect=True)
async def test_a_server_that_never_answers_is_a_timeout(server: str) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()

    with pytest.raises(TimeoutError):
        await OpenAIProvider(base_url=server).list_models(timeout_s=0.3)

    assert loop.time() - started < 10  # the deadline held, whatever the load


@pytest.mark.parametrize("server", [b"<html>not json</html>", b'{"data": 5}'], indirect=True)
async def test_a_reply_that_is_not_a_model_list_says_so(server: str) -> None:
    with pytest.raises(ValueError, match="not an OpenAI model list"):
        await OpenAIProvider(base_url=server).list_models(timeout_s=10)
