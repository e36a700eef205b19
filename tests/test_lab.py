"""`make lab` runs utils.lab: the command it builds, and a real server that answers with its token."""

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from utils import lab
from utils.paths import REPO_ROOT


def test_command_listens_locally_with_token_and_opens_the_work_folder(tmp_path):
    command = lab.lab_command(8899, "abc", headless=True, as_root=True, root=tmp_path)
    assert "--ServerApp.ip=127.0.0.1" in command
    assert "--IdentityProvider.token=abc" in command
    assert "--LabApp.default_url=/lab/tree" in command
    assert "--no-browser" in command and "--allow-root" in command
    assert f"--ServerApp.root_dir={tmp_path}" in command
    assert f"--ServerApp.root_dir={REPO_ROOT / 'work'}" in lab.lab_command(1, "t", headless=True, as_root=False)


def test_desktop_non_root_command_opens_a_browser():
    command = lab.lab_command(8899, "abc", headless=False, as_root=False)
    assert "--no-browser" not in command and "--allow-root" not in command


def test_free_port_skips_a_busy_port():
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert lab.free_port(taken) != taken


def test_a_busy_port_is_named_in_one_line(capsys, tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert lab.main(["--dry-run", "--port", str(taken), "--work", str(tmp_path)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "is busy" in line]
    assert len(lines) == 1
    assert lines[0].startswith(f"Port {taken} is busy") and "make lab PORT=" in lines[0]
    assert f"--ServerApp.port={taken}" not in lines[0]


def test_a_free_port_is_used_silently(capsys, tmp_path):
    port = lab.free_port(0)
    assert lab.main(["--dry-run", "--port", str(port), "--work", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "is busy" not in out and f"--ServerApp.port={port}" in out


def test_dry_run_prints_url_with_token_and_fills_the_work_folder(capsys, tmp_path):
    os.environ["COURSE_LAB_TOKEN"] = "t0ken"
    try:
        assert lab.main(["--dry-run", "--work", str(tmp_path / "work")]) == 0
    finally:
        del os.environ["COURSE_LAB_TOKEN"]
    out = capsys.readouterr().out
    assert "/lab/tree?token=t0ken" in out and f"your work folder is {tmp_path / 'work'}" in out
    chapters = sorted(p.name for p in (REPO_ROOT / "chapters").glob("*.ipynb"))
    assert sorted(p.name for p in (tmp_path / "work").glob("*.ipynb")) == chapters


def start_lab(tmp_path, *args: str):
    """The wrapper as `make lab` runs it, on a free port, with Jupyter's directories in ``tmp_path``."""
    port = lab.free_port(0)
    env = dict(os.environ, COURSE_LAB_TOKEN="s3cret", JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"), JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"))
    proc = subprocess.Popen([sys.executable, "-m", "utils.lab", "--port", str(port), "--work", str(tmp_path / "work"),
                             *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, f"http://127.0.0.1:{port}"


def api(base: str, path: str, method: str = "GET", timeout_s: float = 60) -> str:
    """The server's answer to ``path``, retried until it is up (``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        request = urllib.request.Request(f"{base}{path}", method=method, data=b"{}" if method == "POST" else None,
                                         headers={"Authorization": "token s3cret"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.mark.slow
def test_server_starts_and_serves_the_work_folder(tmp_path):
    import json

    proc, base = start_lab(tmp_path)
    try:
        listing = json.loads(api(base, "/api/contents"))
        names = sorted(item["name"] for item in listing["content"] if item["type"] == "notebook")
        assert names == sorted(p.name for p in (REPO_ROOT / "chapters").glob("*.ipynb"))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.mark.slow
def test_one_ctrl_c_shuts_the_server_and_its_kernels_down_cleanly(tmp_path):
    import json

    import psutil

    proc, base = start_lab(tmp_path)
    family = []
    try:
        api(base, "/api/status")
        kernel_id = json.loads(api(base, "/api/kernels", method="POST"))["id"]
        deadline = time.monotonic() + 60
        while not any(kernel_id in " ".join(child.cmdline()) for child in family):
            assert time.monotonic() < deadline, "no kernel process within 60 s"
            time.sleep(0.5)
            family = psutil.Process(proc.pid).children(recursive=True)  # the server and its kernel
        runtime = tmp_path / "rt"
        assert list(runtime.glob("jpserver-*.json")) and list(runtime.glob("kernel-*.json"))

        os.kill(proc.pid, signal.SIGINT)  # what one Ctrl-C in the terminal sends to `make lab`
        output = proc.communicate(timeout=60)[0].decode()
        assert proc.returncode == 0, output[-2000:]
        assert "Shut down this Jupyter server" not in output
        gone, alive = psutil.wait_procs(family, timeout=10)
        assert alive == [], f"still running after Ctrl-C: {alive}"
        assert list(runtime.glob("jpserver-*.json")) == [] and list(runtime.glob("kernel-*.json")) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        for child in family:
            if child.is_running():
                child.kill()


# --- make lab-zh: the Chinese chapters, JupyterLab's interface in Chinese for this run only ------------

def test_language_settings_select_the_locale_and_keep_jupyterlabs_own(tmp_path):
    import json

    app = tmp_path / "app" / "settings"
    app.mkdir(parents=True)
    (app.parent / "static").mkdir()
    (app / "overrides.json").write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "Dark"}}))
    (app / "page_config.json").write_text('{"x": 1}')
    settings = lab.language_settings(tmp_path / "run", "zh_CN", app_settings=app)
    assert settings == tmp_path / "run" / "settings"
    overrides = json.loads((settings / "overrides.json").read_text())
    assert overrides == {lab.TRANSLATION_PLUGIN: {"locale": "zh_CN"},
                         "@jupyterlab/apputils-extension:themes": {"theme": "Dark"}}
    assert (settings / "page_config.json").read_text() == '{"x": 1}'
    assert (tmp_path / "run" / "static").resolve() == (app.parent / "static").resolve()
    assert json.loads((app / "overrides.json").read_text()) == {"@jupyterlab/apputils-extension:themes":
                                                                {"theme": "Dark"}}  # JupyterLab's own: untouched
    lab.language_settings(tmp_path / "run", "zh_CN", app_settings=app)  # a second run rewrites it, no error


def test_the_chinese_language_pack_is_installed_pinned_and_required():
    assert "zh_CN" in lab.installed_locales(), "pip install jupyterlab-language-pack-zh-cn (requirements-dev.txt)"
    package = lab.LANGUAGE_PACKS["zh_CN"]
    assert f"{package}==" in (REPO_ROOT / "constraints.txt").read_text()
    for name in ("requirements-dev.txt", "binder/requirements.txt"):
        assert package in (REPO_ROOT / name).read_text().splitlines(), f"{name} lacks {package}"


def test_make_lab_zh_runs_the_chinese_lab_and_make_lab_stays_english():
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert "\nlab-zh: setup\n\t$(BIN)/python -m utils.lab --lang zh --port $(PORT) --work $(WORK)/zh\n" in makefile
    assert "\nlab: setup\n\t$(BIN)/python -m utils.lab --port $(PORT) --work $(WORK)\n" in makefile
    assert "make lab-zh" in makefile.split("\n\n")[0] or '"make lab-zh' in makefile
    assert "LANG ?=" not in makefile and "LANG=" not in makefile.replace("COURSE_LANG=", "")


def test_lab_zh_dry_run_fills_the_chinese_work_folder_and_passes_its_settings(capsys, tmp_path):
    import json

    work = tmp_path / "work" / "zh"
    assert lab.main(["--dry-run", "--lang", "zh", "--work", str(work), "--port", "0"]) == 0
    out = capsys.readouterr().out
    chapters = sorted(p.name for p in (REPO_ROOT / "chapters" / "zh").glob("*.ipynb"))
    assert chapters and sorted(p.name for p in work.glob("*.ipynb")) == chapters
    for name in chapters:
        assert (work / name).read_bytes() == (REPO_ROOT / "chapters" / "zh" / name).read_bytes()
    settings = work / lab.LAB_SETTINGS / "settings"
    assert f"--LabApp.app_settings_dir={settings}" in out and f"--ServerApp.root_dir={work}" in out
    assert json.loads((settings / "overrides.json").read_text())[lab.TRANSLATION_PLUGIN] == {"locale": "zh_CN"}


def test_lab_zh_never_overwrites_an_edited_chinese_notebook(capsys, tmp_path):
    work = tmp_path / "zh"
    assert lab.main(["--dry-run", "--lang", "zh", "--work", str(work), "--port", "0"]) == 0
    first = sorted(work.glob("*.ipynb"))[0]
    first.write_text(first.read_text(encoding="utf-8").replace("import", "import  ", 1), encoding="utf-8")
    edited = first.read_bytes()
    chapters = tmp_path / "newer"
    chapters.mkdir()
    for source in (REPO_ROOT / "chapters" / "zh").glob("*.ipynb"):
        (chapters / source.name).write_bytes(source.read_bytes().replace(b"\n", b"\n ", 1))  # a newer course
    assert lab.main(["--dry-run", "--lang", "zh", "--work", str(work), "--port", "0",
                     "--chapters", str(chapters)]) == 0
    assert first.read_bytes() == edited
    assert (work / first.name.replace(".ipynb", ".updated.ipynb")).is_file()
    assert "Your copy is untouched" in capsys.readouterr().out


def test_english_lab_passes_no_language_settings(capsys, tmp_path):
    assert lab.main(["--dry-run", "--work", str(tmp_path / "w"), "--port", "0"]) == 0
    out = capsys.readouterr().out
    assert "app_settings_dir" not in out and not (tmp_path / "w" / lab.LAB_SETTINGS).exists()
    assert not list((tmp_path / "w").glob("zh"))


def test_lab_zh_without_the_language_pack_says_what_to_install(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(lab, "installed_locales", lambda: set())
    assert lab.main(["--dry-run", "--lang", "zh", "--work", str(tmp_path / "zh"), "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert "pip install jupyterlab-language-pack-zh-cn" in err and not (tmp_path / "zh").exists()


@pytest.mark.slow
def test_lab_zh_server_serves_the_chinese_chapters_with_the_chinese_locale(tmp_path):
    import json

    proc, base = start_lab(tmp_path, "--lang", "zh")
    try:
        listing = json.loads(api(base, "/api/contents"))
        names = sorted(item["name"] for item in listing["content"] if item["type"] == "notebook")
        assert names == sorted(p.name for p in (REPO_ROOT / "chapters" / "zh").glob("*.ipynb"))
        setting = json.loads(api(base, f"/lab/api/settings/{lab.TRANSLATION_PLUGIN}"))
        # an override is the setting's default: the learner's own choice (settings) still wins
        assert setting["schema"]["properties"]["locale"]["default"] == "zh_CN", setting["schema"]["properties"]
        assert "locale" not in setting["settings"]
        pack = json.loads(api(base, "/lab/api/translations/zh_CN"))
        assert pack["data"], "the server has no zh_CN language pack"
        strings = json.dumps(pack["data"], ensure_ascii=False)
        assert "文件" in strings  # the File menu
        assert not (tmp_path / "settings").exists() or not any((tmp_path / "settings").rglob("*translation*"))
        english = json.loads(api(base, "/lab/api/translations/"))  # the packs listed, named in the current locale
        assert "zh_CN" in english["data"], english
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
