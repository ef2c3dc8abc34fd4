"""The coverage rule (store/coverage.py): by whole path components, and the two index
lookups (ancestors, the subtree's byte range) agree with it for every path."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agents_room.store import coverage

# Components from a small alphabet that holds the characters just around "/" in byte order
# (".", "0") and a non-ASCII one, so prefixes without a boundary ("api" / "apiary") are common.
_component = st.text(alphabet="ap.0-é", min_size=1, max_size=4).filter(lambda c: c not in {".", ".."})
_parts = st.lists(_component, min_size=0, max_size=4)


def _file(parts: list[str]) -> str:
    return "/" + "/".join(parts) if parts else "/"


def _dir(parts: list[str]) -> str:
    return coverage.as_directory(_file(parts))


def test_a_directory_covers_by_whole_components():
    assert coverage.covers("/r/src/api/", "/r/src/api/x.py")
    assert coverage.covers("/r/src/api/", "/r/src/api/v1/")
    assert coverage.covers("/r/src/api/", "/r/src/api/")
    assert not coverage.covers("/r/src/api/", "/r/src/apiary.py")
    assert not coverage.covers("/r/src/api/", "/r/src/api")  # a file of that name is another node
    assert not coverage.covers("/r/src/api.py", "/r/src/api.py/x")  # a file covers itself alone
    assert coverage.covers("/", "/anything/at/all")


def test_ancestors_root_first():
    assert coverage.ancestors("/a/b/c.py") == ["/", "/a/", "/a/b/"]
    assert coverage.ancestors("/a/b/") == ["/", "/a/"]
    assert coverage.ancestors("/") == []


def test_lease_path_takes_a_trailing_slash_or_an_existing_directory(tmp_path):
    d = tmp_path / "pkg"
    d.mkdir()
    assert coverage.lease_path(str(d), "pkg") == f"{d}/"
    assert coverage.lease_path(str(tmp_path / "new"), "new/") == f"{tmp_path}/new/"
    assert coverage.lease_path(str(tmp_path / "f.py"), "f.py") == f"{tmp_path}/f.py"


@given(_parts, _parts, st.booleans())
def test_covering_paths_are_exactly_the_leases_that_cover(lease_parts, path_parts, path_is_dir):
    path = _dir(path_parts) if path_is_dir else _file(path_parts)
    for lease in (_dir(lease_parts), _file(lease_parts)):
        assert (lease in coverage.covering_paths(path)) == coverage.covers(lease, path)


@given(_parts, _parts, st.booleans())
def test_the_subtree_range_holds_exactly_what_the_directory_covers(dir_parts, path_parts, path_is_dir):
    directory = _dir(dir_parts)
    path = _dir(path_parts) if path_is_dir else _file(path_parts)
    lo, hi = coverage.subtree_range(directory)
    in_range = lo.encode() <= path.encode() < hi.encode()  # byte order, as BINARY and COLLATE "C" compare
    assert in_range == coverage.covers(directory, path)


_glob = st.text(alphabet="ap/*?[]!.", min_size=0, max_size=8)


@given(_glob, _parts, st.text(alphabet="ap/.", max_size=6))
def test_a_glob_that_matches_a_path_beneath_reaches_the_directory(pattern, dir_parts, rest):
    import fnmatch

    directory = _dir(dir_parts)
    if fnmatch.fnmatchcase(directory + rest, pattern):
        assert coverage.glob_reaches_beneath(pattern, directory)


def test_a_glob_reaches_beneath_a_directory_only_where_it_can_go_on():
    assert coverage.glob_reaches_beneath("src/api/*.py", "src/api/")
    assert coverage.glob_reaches_beneath("*.py", "src/api/")
    assert coverage.glob_reaches_beneath("src/a[!x]i/x", "src/api/")
    assert not coverage.glob_reaches_beneath("src/apiary.py", "src/api/")
    assert not coverage.glob_reaches_beneath("src/a[!p]i/x", "src/api/")
    assert not coverage.glob_reaches_beneath("lib/*", "src/api/")


def test_a_file_glob_meets_a_directory_lease_in_its_own_forms_or_beneath():
    assert coverage.glob_reaches("src/api/x.py", "/r/src/api/", "/r")
    assert coverage.glob_reaches("api", "/r/src/api/", "/r")  # its base name
    assert coverage.glob_reaches("x.py", "/r/src/api/", "/r/src/api")  # relative to a holder inside it
    assert not coverage.glob_reaches("x.py", "/r/src/api/", "/r")  # a base name names no directory
    assert not coverage.glob_reaches("src/api/x.py", "/r/src/api", "/r")  # a file lease covers itself alone
