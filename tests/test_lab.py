"""`make lab` runs utils.lab: the command it builds, what it prints (first, in the run's language, and last),
the settings it hands JupyterLab, and a real server that answers with its token."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from utils import lab, lab_config
from utils.paths import REPO_ROOT


def test_command_listens_locally_with_token_and_opens_the_work_folder(tmp_path):
    command = lab.lab_command(8899, "abc", headless=True, as_root=True, root=tmp_path)
    assert "--ServerApp.ip=127.0.0.1" in command
    assert "--IdentityProvider.token=abc" in command
    assert "--LabApp.default_url=/lab" in command  # /lab/tree opened on a "Path Not Found" dialog
    assert "--Application.log_level=WARN" in command  # Jupyter's "Control-C ... twice" line is not shown
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
    assert "http://127.0.0.1:" in out and "/lab?token=t0ken" in out and "/lab/tree" not in out
    assert out.splitlines()[0] == f"Attention, Step by Step: your work folder is {tmp_path / 'work'}"
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
        assert "Shut down this Jupyter server" not in output and "twice to skip confirmation" not in output
        assert [line for line in output.splitlines() if line.strip()][-1] == "JupyterLab has stopped.", output
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

def test_lab_settings_quiet_jupyter_select_the_locale_and_keep_jupyterlabs_own(tmp_path):
    import json

    app = tmp_path / "app" / "settings"
    app.mkdir(parents=True)
    (app.parent / "static").mkdir()
    (app / "overrides.json").write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "Dark"}}))
    (app / "page_config.json").write_text('{"x": 1}')
    settings = lab_config.lab_settings(tmp_path / "run", "zh_CN", app_settings=app)
    assert settings == tmp_path / "run" / "settings"
    overrides = json.loads((settings / "overrides.json").read_text())
    assert overrides == {lab.TRANSLATION_PLUGIN: {"locale": "zh_CN"},
                         # no "Would you like to get notified about official Jupyter news?", no update check
                         lab_config.NOTIFICATION_PLUGIN: {"fetchNews": "false", "checkForUpdates": False},
                         "@jupyterlab/apputils-extension:themes": {"theme": "Dark"}}
    assert (settings / "page_config.json").read_text() == '{"x": 1}'
    assert (tmp_path / "run" / "static").resolve() == (app.parent / "static").resolve()
    assert json.loads((app / "overrides.json").read_text()) == {"@jupyterlab/apputils-extension:themes":
                                                                {"theme": "Dark"}}  # JupyterLab's own: untouched
    english = lab_config.lab_settings(tmp_path / "run", None, app_settings=app)  # a second run rewrites it
    assert lab.TRANSLATION_PLUGIN not in json.loads((english / "overrides.json").read_text())


def test_the_chinese_language_pack_is_installed_pinned_and_required():
    assert "zh_CN" in lab.installed_locales(), "pip install jupyterlab-language-pack-zh-cn (requirements-lab.txt)"
    package = lab.LANGUAGE_PACKS["zh_CN"]
    assert f"{package}==" in (REPO_ROOT / "constraints.txt").read_text()
    for name in ("requirements-lab.txt", "binder/requirements.txt"):
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
    assert "你的副本保持不变" in capsys.readouterr().out  # make lab-zh says so in Chinese


def test_english_lab_is_quiet_and_english_with_a_workspace_of_its_own(capsys, tmp_path):
    import json

    work = tmp_path / "w"
    assert lab.main(["--dry-run", "--work", str(work), "--port", "0"]) == 0
    out = capsys.readouterr().out
    settings = work / lab.LAB_SETTINGS / "settings"
    assert f"--LabApp.app_settings_dir={settings}" in out
    overrides = json.loads((settings / "overrides.json").read_text())
    assert overrides[lab_config.NOTIFICATION_PLUGIN]["fetchNews"] == "false" and lab.TRANSLATION_PLUGIN not in overrides
    # JupyterLab's workspaces (the open tabs) live in the work folder: a fresh clone reopens no old tab
    assert f"--LabApp.workspaces_dir={work / lab.LAB_SETTINGS / 'workspaces'}" in out
    assert not list(work.glob("zh"))


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


# --- what the terminal shows: in the run's language, JupyterLab's URL once it answers, Ctrl-C last -----
HAN = re.compile(r"[\u4e00-\u9fff]")


def test_lab_zh_speaks_chinese_in_the_terminal_and_make_lab_english(capsys, tmp_path):
    os.environ["COURSE_LAB_TOKEN"] = "t0ken"
    try:
        assert lab.main(["--dry-run", "--lang", "zh", "--work", str(tmp_path / "zh"), "--port", "0"]) == 0
        zh = capsys.readouterr().out
        assert lab.main(["--dry-run", "--work", str(tmp_path / "en"), "--port", "0"]) == 0
        en = capsys.readouterr().out
    finally:
        del os.environ["COURSE_LAB_TOKEN"]

    def own_lines(out: str) -> list[str]:  # the launcher's sentences: not the command, the URL or a blank
        return [line for line in out.splitlines() if line.strip() and "-m jupyterlab" not in line
                and "token=t0ken" not in line]

    assert len(own_lines(zh)) == len(own_lines(en)) >= 4
    assert all(HAN.search(line) for line in own_lines(zh)), own_lines(zh)
    assert not any(HAN.search(line) for line in own_lines(en)), own_lines(en)
    assert "Ctrl-C" in own_lines(zh)[-1] and own_lines(en)[-1].strip() == CTRL_C_LINE


CTRL_C_LINE = "To stop JupyterLab, press Ctrl-C once in this terminal."
# A stand-in for `jupyter lab`: a line of its own, then it waits; SIGTERM ends it as jupyter_server does.
FAKE_SERVER = ("import signal, sys, time\n"
               "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
               "print('[W server] a line of its own', flush=True)\n"
               "time.sleep(120)\n")
RUN_SERVER = """import sys
from utils import lab
polls = []
def ready():  # the server answers at the fourth poll
    polls.append(1)
    return len(polls) >= 4
status = lab.run_server([sys.executable, "-c", sys.argv[1]], ready=ready, poll_s=0.05, dot_s=0.0,
                        on_ready=lambda: print(lab.ready_banner("http://127.0.0.1:1/lab?token=x", "work"), flush=True))
print("status", status, "polls", len(polls), flush=True)
"""


def test_run_server_waits_for_the_server_then_ends_on_the_ctrl_c_line_and_one_ctrl_c_stops_it():
    proc = subprocess.Popen([sys.executable, "-c", RUN_SERVER, FAKE_SERVER], cwd=REPO_ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        seen = []
        for line in proc.stdout:
            seen.append(line.rstrip("\n"))
            if line.strip() == CTRL_C_LINE:
                break
        os.kill(proc.pid, signal.SIGINT)  # one Ctrl-C
        rest = proc.communicate(timeout=60)[0].splitlines()
    finally:
        if proc.poll() is None:
            proc.kill()
    text = "\n".join(seen + rest)
    # the server's lines came before the banner (on a busy machine a waiting dot may precede its first line:
    # the server writes to the terminal itself, between our dots)
    assert "[W server] a line of its own" in [line.lstrip(".") for line in seen], text
    assert seen[seen.index("    http://127.0.0.1:1/lab?token=x") - 2].endswith("JupyterLab is ready. Open this URL "
                                                                               "in your browser:"), text
    assert [line for line in rest if line.strip()] == [
        "Stopping JupyterLab: shutting its kernels down (Ctrl-C again to kill it).", "JupyterLab has stopped.",
        "status 0 polls 4"], text  # the banner printed once, when the fourth poll answered


def test_the_courses_own_notebooks_are_trusted_and_nothing_else(tmp_path):
    import nbformat
    from nbformat.sign import NotebookNotary

    work, chapters = tmp_path / "work", REPO_ROOT / "chapters"
    work.mkdir()
    first, second = sorted(chapters.glob("0*.ipynb"))[:2]
    shutil.copyfile(first, work / first.name)  # the course's copy, as make lab left it
    shutil.copyfile(second, work / "someone_elses.ipynb")  # the course's content under another name: still its own
    edited = nbformat.read(second, as_version=4)
    edited.cells[0].source += "\nan edit that was never saved by JupyterLab"
    nbformat.write(edited, work / second.name)
    (tmp_path / "data").mkdir()
    notary = NotebookNotary(data_dir=str(tmp_path / "data"))

    def trusted(name: str) -> bool:
        return notary.check_signature(nbformat.read(work / name, as_version=4))

    before = {path.name: path.read_bytes() for path in work.iterdir()}
    assert lab_config.trust_course_notebooks(work, chapters, notary) == sorted([first.name, "someone_elses.ipynb"])
    assert trusted(first.name) and trusted("someone_elses.ipynb") and not trusted(second.name)
    assert {path.name: path.read_bytes() for path in work.iterdir()} == before  # no notebook was rewritten
    assert lab_config.trust_course_notebooks(work, chapters, notary) == []  # already trusted: nothing to sign
