"""A user's script type-checks with concrete types, as an installed package.

mypy runs on ``tests/typing/user_script.py`` copied to a temporary directory,
from there: it must find ``jetstream_sync`` the way a user's project does
(through the install, editable included), not through this checkout.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy is not installed (it comes with the dev extra)")

SCRIPT = Path(__file__).resolve().parent.parent / "typing" / "user_script.py"
REVEALED = re.compile(r"^user_script\.py:(\d+): note: Revealed type is \"(.*)\"$")


@pytest.fixture(scope="module")
def mypy_run(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    work = tmp_path_factory.mktemp("typing")
    shutil.copy(SCRIPT, work / "user_script.py")
    cmd = [sys.executable, "-m", "mypy", "--strict", "--no-color-output", "--cache-dir", str(work / "cache"),
           "user_script.py"]  # fmt: skip
    return subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=60)


def test_every_revealed_type_along_the_tour_is_concrete(mypy_run: subprocess.CompletedProcess[str]) -> None:
    expected = {n for n, line in enumerate(SCRIPT.read_text().splitlines(), 1) if line.lstrip().startswith("reveal_type(")}
    revealed = {int(m[1]): m[2] for m in map(REVEALED.match, mypy_run.stdout.splitlines()) if m}
    assert revealed.keys() == expected, mypy_run.stdout + mypy_run.stderr
    vague = {n: t for n, t in revealed.items() if re.search(r"\bAny\b", t)}
    assert not vague, f"types with Any at user_script.py lines {vague}"
    # Spot checks that the package was resolved, not stubbed out.
    assert revealed[min(expected)] == "jetstream_sync.client.Client"
    assert "jetstream_sync.models.PubAck" in revealed.values()
    assert "jetstream_sync._core.message.Msg" in revealed.values()


def test_the_script_passes_mypy_strict(mypy_run: subprocess.CompletedProcess[str]) -> None:
    assert mypy_run.returncode == 0, mypy_run.stdout + mypy_run.stderr
    assert ": error:" not in mypy_run.stdout


def test_consumer_lookups_and_creators_reveal_the_kind_of_handle_they_return(
    mypy_run: subprocess.CompletedProcess[str],
) -> None:
    """consumer()/create_consumer() give a pull Consumer, the push calls a
    PushConsumer, given keywords or a config object: never their union."""
    revealed = {int(m[1]): m[2] for m in map(REVEALED.match, mypy_run.stdout.splitlines()) if m}
    kinds = {}
    for n, line in enumerate(SCRIPT.read_text().splitlines(), 1):
        call = re.match(r"\s*reveal_type\(((?:js|stream)\.\w*consumer\((?:[^()]|\([^()]*\))*\))\)$", line)
        if call and n in revealed:
            kinds[call[1]] = revealed[n]
    pull, push = "jetstream_sync.consumer.Consumer", "jetstream_sync.push.PushConsumer"
    assert kinds == {
        'stream.consumer("billing")': pull,
        'js.consumer("ORDERS", "billing")': pull,
        'js.create_consumer("ORDERS", durable_name="audit")': pull,
        'stream.update_consumer(durable_name="audit")': pull,
        'stream.push_consumer("audit-push")': push,
        'js.push_consumer("ORDERS", "audit-push")': push,
        'stream.create_push_consumer(durable_name="audit-push", deliver_subject="audit.push")': push,
        'js.create_or_update_push_consumer("ORDERS", durable_name="audit-push", deliver_subject="audit.push")': push,
        'stream.create_push_consumer(jss.ConsumerConfig(durable_name="audit-push", deliver_subject="audit.push"))': push,
        'stream.create_or_update_consumer(jss.ConsumerConfig(durable_name="audit"))': pull,
        'js.update_consumer("ORDERS", jss.ConsumerConfig(durable_name="audit"))': pull,
    }, mypy_run.stdout
    assert mypy_run.returncode == 0, mypy_run.stdout + mypy_run.stderr  # the annotated lookups of worker()
