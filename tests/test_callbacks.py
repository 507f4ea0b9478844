"""Callbacks handed to the interpreter: seen as coroutine functions, and a call that is never
awaited (the interpreter dropped it while stopping) leaves no coroutine to warn about."""

from __future__ import annotations

import gc
import inspect

import bashkit

from fake_server.callbacks import lazy


async def add_one(value: int) -> int:
    return value + 1


async def test_a_lazy_callback_is_a_coroutine_function_that_awaits_like_one() -> None:
    callback = lazy(add_one)
    assert inspect.iscoroutinefunction(callback)
    assert await callback(41) == 42


def test_a_dropped_call_creates_no_coroutine() -> None:
    # pytest turns warnings into errors here (filterwarnings = error): a coroutine never
    # awaited would fail this test when collected. The plain function shows the difference.
    calls = [lazy(add_one)(n) for n in range(3)]
    del calls
    gc.collect()
    coroutine = add_one(1)
    assert inspect.iscoroutine(coroutine)
    coroutine.close()  # what a plain coroutine function's dropped call would need


async def test_the_interpreter_takes_lazy_commands_and_sinks() -> None:
    async def greet(ctx: bashkit.CommandContext) -> int:
        await ctx.stdout.write(b"hello\n")
        return 3

    written: list[bytes] = []

    async def sink(data: bytes) -> None:
        written.append(data)

    bash = bashkit.Bash()
    bash.add_command("greet", lazy(greet))
    result = await bash.execute("greet; echo $?", stdout=lazy(sink))
    assert result.exit_code == 0
    assert b"".join(written) == b"hello\n3\n"
