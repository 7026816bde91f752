"""actions/checkout's stand-in (tests/actions/checkout/action.yml): a clean checkout from a local bare repository."""

import os
import shutil
import subprocess
import sys
from pathlib import Path


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def main() -> int:
    origin = Path(os.environ["OPGATE_ACT_GIT"]) / f"{os.environ['REPOSITORY']}.git"
    if not origin.is_dir():
        print(f"::error::checkout stand-in: no repository {origin}", file=sys.stderr)
        return 1
    dest = (Path(os.environ["GITHUB_WORKSPACE"]) / os.environ["CHECKOUT_PATH"]).resolve()
    ref = os.environ["REF"] or os.environ["EVENT_SHA"]
    # actions/checkout cleans the path first (clean: true): nothing an earlier job left there survives
    if dest.exists():
        for entry in dest.iterdir():
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    dest.mkdir(parents=True, exist_ok=True)
    git("init", "-q", cwd=dest)
    git("remote", "add", "origin", str(origin), cwd=dest)
    if os.environ["DEPTH"] == "0":
        git("fetch", "-q", "--tags", "origin", "+refs/heads/*:refs/remotes/origin/*", cwd=dest)
    git("fetch", "-q", "origin", ref, cwd=dest)
    git("checkout", "-q", "--force", "--detach", "FETCH_HEAD", cwd=dest)
    if os.environ["PERSIST"] != "false":
        git("config", "--local", "http.extraheader", "AUTHORIZATION: basic ***", cwd=dest)
    print(f"checked out {git('rev-parse', 'HEAD', cwd=dest)} of {os.environ['REPOSITORY']} into {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
