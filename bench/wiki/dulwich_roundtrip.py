"""One Dulwich wiki round trip, the way the reference backend works: fetch the
branch history into an in-memory repository, append a line to one page, commit
on the fetched tip, push with the old tip as the expected value. Prints the
elapsed milliseconds (interpreter start-up and imports excluded)."""

import sys
import time

from dulwich.client import get_transport_and_path
from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import MemoryRepo


def main() -> None:
    url, page, line = sys.argv[1], sys.argv[2], sys.argv[3]
    start = time.perf_counter()
    client, path = get_transport_and_path(url)
    repo = MemoryRepo()
    result = client.fetch(path, repo, determine_wants=lambda refs, depth=None: [refs[b"refs/heads/master"]])
    tip = result.refs[b"refs/heads/master"]
    commit = repo[tip]
    parts = page.encode().split(b"/")

    def replaced(tree_id, names):
        tree = repo[tree_id]
        mode, child = tree[names[0]]
        if len(names) == 1:
            blob = Blob.from_string(repo[child].data + line.encode())
            repo.object_store.add_object(blob)
            tree[names[0]] = (mode, blob.id)
        else:
            tree[names[0]] = (mode, replaced(child, names[1:]))
        repo.object_store.add_object(tree)
        return tree.id

    new = Commit()
    new.tree = replaced(commit.tree, parts)
    new.parents = [tip]
    new.author = new.committer = b"bench <bench@example.org>"
    new.author_time = new.commit_time = int(time.time())
    new.author_timezone = new.commit_timezone = 0
    new.message = b"bench: append one line\n"
    repo.object_store.add_object(new)

    def update_refs(refs):
        if refs.get(b"refs/heads/master") != tip:
            raise RuntimeError("base moved")
        return {b"refs/heads/master": new.id}

    result = client.send_pack(path, update_refs, repo.object_store.generate_pack_data)
    if result.ref_status and result.ref_status.get(b"refs/heads/master"):
        raise RuntimeError(f"push rejected: {result.ref_status}")
    print(f"{(time.perf_counter() - start) * 1000:.3f}")


if __name__ == "__main__":
    main()
