"""actions/upload-artifact's and download-artifact's stand-in (tests/actions/*/action.yml): the artifacts go to act's
own artifact server (`act --artifact-server-path`) through the v4 protocol its server speaks (twirp JSON at
$ACTIONS_RESULTS_URL, the zip PUT to and GET from the signed URLs it returns), so the jobs of one run pass them on."""

import http.client
import io
import json
import os
import sys
import urllib.request
import zipfile
from fnmatch import fnmatch
from pathlib import Path

SERVICE = "twirp/github.actions.results.api.v1.ArtifactService"


def call(method: str, body: dict) -> dict:
    url = f"{os.environ['ACTIONS_RESULTS_URL'].rstrip('/')}/{SERVICE}/{method}"
    run = os.environ["GITHUB_RUN_ID"]
    data = json.dumps({"workflowRunBackendId": run, "workflowJobRunBackendId": run, **body}).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read() or b"{}")


def upload(name: str, path: Path, if_no_files: str) -> int:
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path] if path.is_file() else []
    if not files:
        message = f"No files were found with the provided path: {path}. No artifacts will be uploaded."
        if if_no_files == "error":
            print(f"::error::{message}")
            return 1
        print(f"::warning::{message}" if if_no_files == "warn" else message)
        return 0
    buffer = io.BytesIO()
    root = path if path.is_dir() else path.parent
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in files:
            archive.write(file, file.relative_to(root).as_posix())
    blob = buffer.getvalue()
    signed = call("CreateArtifact", {"name": name, "version": 4})["signedUploadUrl"]
    put = urllib.request.Request(f"{signed}&comp=block", data=blob, method="PUT")
    urllib.request.urlopen(put, timeout=60).close()
    call("FinalizeArtifact", {"name": name, "size": str(len(blob))})
    print(f"Artifact {name} uploaded: {len(files)} file(s), {len(blob)} bytes")
    return 0


def download(name: str, pattern: str, path: Path) -> int:
    try:
        listed = [a["name"] for a in call("ListArtifacts", {}).get("artifacts", [])]
    except http.client.RemoteDisconnected:  # act's server drops the request of a run nothing was uploaded in yet
        listed = []
    if name:
        if name not in listed:
            print(f"::error::Unable to download artifact(s): Artifact not found for name: {name}")
            return 1
        chosen, into = [name], {name: path}
    else:
        chosen = [a for a in listed if fnmatch(a, pattern or "*")]
        into = {a: path / a for a in chosen}  # several artifacts: each into a folder of its name
    for artifact in chosen:
        signed = call("GetSignedArtifactURL", {"name": artifact})["signedUrl"]
        with urllib.request.urlopen(signed, timeout=60) as answer:
            zipfile.ZipFile(io.BytesIO(answer.read())).extractall(into[artifact])
        print(f"Artifact {artifact} downloaded into {into[artifact]}")
    print(f"Total of {len(chosen)} artifact(s) downloaded")
    return 0


def main() -> int:
    workspace = Path(os.environ["GITHUB_WORKSPACE"])
    path = workspace / os.path.expanduser(os.environ.get("ARTIFACT_PATH") or ".")
    if sys.argv[1] == "upload":
        return upload(os.environ["ARTIFACT_NAME"], path, os.environ.get("IF_NO_FILES_FOUND", "warn"))
    return download(os.environ.get("ARTIFACT_NAME", ""), os.environ.get("ARTIFACT_PATTERN", ""), path)


if __name__ == "__main__":
    sys.exit(main())
