"""``sim fit`` writes numbers and distributions only: a store full of distinctive names
(repositories, rooms, tags, labels, paths, subjects, bodies, harness keys, session ids) gives
a fitted file holding none of them, and still the traffic's shape."""

from __future__ import annotations

import subprocess
from pathlib import Path

from agents_room.store import Store
from sim.cli import main
from sim.scenario.scenario import load

SECRETS = {
    "repo": "zanzibar-ledger", "room": "team:quokka-payroll", "room2": "ops:narwhal-pager", "tag": "velvet-hammer",
    "label": "marmalade-refactor", "path": "src/obsidian_invoice_parser.py", "subject": "periwinkle deadline",
    "body": "the tangerine migration moves wombat rows", "key": "9c6a1f3e-77b2-4d1c-8e5f-0a1b2c3d4e5f",
}


def test_no_name_path_label_subject_or_body_reaches_the_fitted_file(tmp_path: Path, capsys) -> None:
    repo = tmp_path / SECRETS["repo"]
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "src").mkdir()
    secret_file = repo / SECRETS["path"]
    secret_file.write_text("x = 1\n")
    db = tmp_path / "store" / "room.db"
    ids = []
    with Store.open(db) as store:
        for i in range(3):
            joined = store.room_join(cwd=str(repo), pid=None, room=SECRETS["room"], extra_rooms=[SECRETS["room2"]],
                                     label=f"{SECRETS['label']}-{i}", tags=[SECRETS["tag"]],
                                     harness_key=SECRETS["key"] if i == 0 else None)
            ids.append(joined.session_id)
        for sid in ids:
            for call in range(4):
                store.lease_claim(sid, SECRETS["path"], ttl_s=30 + call)
                store.msg_send(sid, "*", subject=SECRETS["subject"], body=SECRETS["body"])
                store.msg_send(sid, f"tag:{SECRETS['tag']}", subject=SECRETS["subject"], body=SECRETS["body"])
                store.msg_send(sid, f"file:{Path(SECRETS['path']).name}", subject=SECRETS["subject"])
                store.note_read(sid, str(secret_file))
                store.room_history(sid, SECRETS["room"])
                store.lease_release(sid, SECRETS["path"]) if call % 2 else None
                store.calls.count("lease_check", sid, "ok", 0.0, 0.001)  # type: ignore[union-attr]
    out = tmp_path / "ours.toml"
    assert main(["fit", str(db), "--out", str(out)]) == 0
    text = out.read_text()
    lowered = text.lower()
    found = {what: value for what, value in SECRETS.items() if value.lower() in lowered}
    for what, value in SECRETS.items():  # the pieces too: a name split at its separators
        for piece in value.replace(":", " ").replace("/", " ").replace("-", " ").replace("_", " ").replace(".", " ").split():
            if len(piece) >= 6:
                assert piece.lower() not in lowered, (what, piece)
    assert not found, found
    assert not any(sid in text for sid in ids)
    assert str(tmp_path) not in text
    # still the traffic's shape: one repo of 3 agents in 2 shared rooms, sends by selector kind
    fitted = load(out)
    assert [(len(r.rooms), len(r.tags)) for r in fitted.repos] == [(2, 1)]
    assert fitted.fitted.sessions == 3 and 2 <= fitted.repos[0].agents <= 3  # type: ignore[union-attr]
    assert dict(fitted.fitted.sends).keys() == {"broadcast", "tag", "file"}  # type: ignore[union-attr]
    assert dict(fitted.fitted.tools)["lease_check"] > 0  # type: ignore[union-attr]
    assert set(fitted.workload.lease_ttl_s) <= {30, 31, 32, 33}
