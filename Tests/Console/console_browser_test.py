#!/usr/bin/env python3
"""The operator console in a real browser (make test-console).

Starts a real `sync-server serve` on a loopback port over a temporary data folder, seeds it, has
`sync-device` devices sync (so the census knows them), then drives headless Chromium through
selenium: signs in with an admin token (after a wrong one), sees the devices, opens one and
revokes it (its next request is refused 401), sees the census change after another device syncs,
checks that erasing a user asks for confirmation and erases after it, lists the open sessions and
ends another admin's, and checks that no page broke the content security policy and that the
pages work by keyboard. Every form submitted and link followed waits for the new page to replace
the old one before anything is read from it (Browser.navigate).

    python3 Tests/Console/console_browser_test.py [--bin DIR] [--screenshots DIR] [--keep]

--screenshots DIR writes a PNG of each page visited (docs/console/ holds the committed ones).
Needs Debian's chromium and chromium-driver and PyPI's selenium (.ci/run installs them).
"""

import argparse
import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import TimeoutException, WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TENANT = "demo"


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)
    print(f"  ok: {message}")


class Server:
    """sync-server serve on a free loopback port, over a fresh data folder."""

    def __init__(self, bin_dir, work):
        self.bin = bin_dir
        self.data = os.path.join(work, "server")
        self.log_path = os.path.join(work, "server.log")
        subprocess.run([self.tool("sync-server"), "seed", "--data", self.data, "--tenant", TENANT], check=True, capture_output=True)
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [self.tool("sync-server"), "serve", "--data", self.data, "--port", "0", "--rate", "0"],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.process.stdout.readline()
        match = re.search(r"listening on (http://[0-9.]+:[0-9]+)", line)
        if not match:
            raise Failure(f"the server did not start: {line!r}; log in {self.log_path}")
        self.url = match.group(1)

    def tool(self, name):
        return os.path.join(self.bin, name)

    def token(self, user, device, team=None, admin=False):
        command = [self.tool("sync-server"), "token", "--data", self.data, "--tenant", TENANT, "--user", user, "--device", device]
        if team:
            command += ["--team", team]
        if admin:
            command += ["--admin", "--ttl", "3600"]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


class Device:
    """A sync-device home folder logged in to the server."""

    def __init__(self, server, work, user, device, team="team-1", app="fieldops-cli/1.4.2"):
        self.server = server
        self.name = device
        self.token = server.token(user, device, team=team)
        self.home = os.path.join(work, device)
        # The app version and the opt-in telemetry (queue, conflicts) the census keeps.
        self.run("login", "--server", server.url, "--token", self.token, "--app-version", app, "--telemetry")

    def run(self, *arguments, expect=0):
        result = subprocess.run(
            [self.server.tool("sync-device"), *arguments, "--home", self.home], capture_output=True, text=True, timeout=60)
        if result.returncode != expect:
            raise Failure(f"sync-device {' '.join(arguments)} exited {result.returncode}: {result.stdout}{result.stderr}")
        return result.stdout

    def sync(self, expect=0):
        return self.run("sync", expect=expect)

    def status_of_request(self):
        """The HTTP status of a pull with this device's token, as any client would see it."""
        request = urllib.request.Request(f"{self.server.url}/sync/v1/pull?scope=user", headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, ""
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}").get("error", {}).get("code", "")


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def console_request(server, path, cookie=None, form=None):
    """One request to the console outside the browser (another admin's), redirects not followed:
    (status, Location, the session cookie it set)."""
    headers = {"Cookie": f"outpost_console={cookie}"} if cookie else {}
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    request = urllib.request.Request(server.url + path, data=data, headers=headers)
    opener = urllib.request.build_opener(NoRedirects)
    try:
        response = opener.open(request, timeout=10)
    except urllib.error.HTTPError as error:
        response = error
    set_cookie = response.headers.get("Set-Cookie") or ""
    match = re.match(r"outpost_console=([^;]*)", set_cookie)
    return response.status if hasattr(response, "status") else response.code, response.headers.get("Location"), match.group(1) if match else None


class Browser:
    def __init__(self, base, screenshots):
        options = Options()
        options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
        for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000", "--force-color-profile=srgb"]:
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver")
        self.driver = webdriver.Chrome(service=service, options=options)
        self.driver.set_page_load_timeout(30)
        self.base = base
        self.screenshots = screenshots
        self.problems = []

    def open(self, path):
        """Loads a page and waits until it is the document in the window (driver.get waits for
        the load; the marker check makes that explicit)."""
        self.navigate(lambda: self.driver.get(self.base + path))

    def text(self):
        return self.driver.find_element(By.TAG_NAME, "body").text

    def heading(self):
        return self.driver.find_element(By.TAG_NAME, "h1").text

    def shot(self, name):
        if self.screenshots:
            # The whole page, not just the window, without resizing it.
            width, height = self.driver.execute_script(
                "return [document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            shot = self.driver.execute_cdp_cmd("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": width, "height": min(height, 4000), "scale": 1}})
            with open(os.path.join(self.screenshots, f"{name}.png"), "wb") as file:
                file.write(base64.b64decode(shot["data"]))

    def collect_problems(self):
        for entry in self.driver.get_log("browser"):
            message = entry.get("message", "")
            # A refused sign-in or revoked device is answered 401 on purpose: not a problem of the page.
            if "status of 401" in message or "status of 403" in message or "status of 422" in message:
                continue
            if entry.get("level") in ("SEVERE", "WARNING") or "Content Security Policy" in message:
                self.problems.append(message)

    # Navigation. A form submitted or a link followed replaces the document some time after the
    # key press that did it: reading the page before then reads the old one, or a node of a
    # document being torn down ("Node with given id does not belong to the document"). So every
    # action that navigates marks the current window first, and the page is read only once a
    # document without the mark (a new one) has loaded completely and shows its <main>.

    _marks = itertools.count(1)

    def _mark(self):
        mark = next(self._marks)
        self.driver.execute_script("window.__outpostPage = arguments[0];", mark)
        return mark

    def _replaced(self, mark):
        """Whether the window holds a new document, fully loaded; False while it is changing."""
        try:
            return self.driver.execute_script(
                "return window.__outpostPage !== arguments[0] && document.readyState === 'complete'"
                " && document.querySelector('main') !== null;", mark)
        except WebDriverException:
            # The document is being replaced (no execution context for a moment): not yet.
            return False

    def navigate(self, action, timeout=20):
        """Runs `action` (which makes the window load another page) and waits until the new page
        has replaced the old one and loaded."""
        try:
            mark = self._mark()
        except WebDriverException:
            mark = -1  # no page yet (the first load)
        action()
        try:
            WebDriverWait(self.driver, timeout, poll_frequency=0.05).until(lambda _: self._replaced(mark))
        except TimeoutException:
            raise Failure(f"no new page replaced {self.driver.current_url} within {timeout} s")
        self.collect_problems()

    def press_enter(self, find):
        """Finds an element with `find` and activates it from the keyboard (Enter), as someone
        without a mouse does; then waits for the page it leads to."""
        self.navigate(lambda: find().send_keys(Keys.ENTER))

    def click(self, locator):
        """Activates the link or button `locator` (a (By, value) pair) with Enter and waits for the
        page it leads to."""
        self.press_enter(lambda: self.driver.find_element(*locator))

    def click_css(self, selector):
        self.click((By.CSS_SELECTOR, selector))

    def submit(self, form_selector):
        self.click_css(form_selector + " button[type=submit]")

    def quit(self):
        self.driver.quit()


def run(bin_dir, screenshots, keep):
    work = tempfile.mkdtemp(prefix="outpost-console-")
    server = Server(bin_dir, work)
    browser = None
    try:
        print(f"sync-server at {server.url}")
        ana = Device(server, work, "op-ana", "tablet-ana")
        ben = Device(server, work, "op-ben", "tablet-ben", app="fieldops-cli/1.3.0")
        cleo = Device(server, work, "learner-cleo", "phone-cleo", team=None, app="learning-cli/2.0.0")
        for device in (ana, ben, cleo):
            device.sync()
        # Some of each one's own: ana starts a task, cleo answers a question (her data to erase later).
        ana.run("task", "start", "team-1-task-swap-017")
        ana.sync()
        # Ben started the same task from what he pulled before: his write comes back conflicted.
        ben.run("task", "start", "team-1-task-swap-017")
        ben.sync(expect=4)  # sync-device's exit status for "synced, with conflicts to resolve"
        cleo.run("open", "lesson-battery-anatomy")
        cleo.run("answer", "assessment-battery-basics", "q1", "0")
        cleo.sync()
        admin = server.token("ops-admin", "console-browser", admin=True)

        browser = Browser(server.url, screenshots)
        driver = browser.driver

        print("signing in")
        browser.open("/console")
        check(driver.current_url.endswith("/console/sign-in"), "an unauthenticated page goes to the sign-in form")
        check(driver.find_element(By.TAG_NAME, "html").get_attribute("lang") == "en", "the page says its language")
        # Keyboard: the first Tab reaches the skip link, and the token field is labelled.
        driver.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
        check(driver.switch_to.active_element.get_attribute("class") == "skip-link", "the first Tab stop is the skip link")
        token_field = driver.find_element(By.ID, "token")
        check(driver.find_element(By.CSS_SELECTOR, "label[for=token]").text == "Admin token", "the token field is labelled")
        browser.shot("sign-in")
        token_field.send_keys("not-a-token")
        browser.submit("form[action='/console/sign-in']")
        check("That token was not accepted" in browser.text(), "a wrong token shows the form again with a message")
        browser.navigate(lambda: driver.find_element(By.ID, "token").send_keys(admin + Keys.ENTER))
        check(driver.current_url.endswith("/console"), "the admin token signs in and lands on the fleet page")
        cookies = {cookie["name"]: cookie for cookie in driver.get_cookies()}
        session = cookies.get("outpost_console")
        check(session is not None and session["httpOnly"] and session.get("sameSite") == "Strict", "the session cookie is HttpOnly and SameSite=Strict")
        check(driver.execute_script("return document.cookie") == "", "no script can read the session cookie")

        print("fleet and census")
        fleet = browser.text()
        for name in ("tablet-ana", "tablet-ben", "phone-cleo"):
            check(name in fleet, f"the fleet page lists {name}")
        for app in ("fieldops-cli/1.4.2", "fieldops-cli/1.3.0", "learning-cli/2.0.0"):
            check(app in fleet, f"the fleet page counts devices of {app}")
        active_before = int(driver.find_element(By.CSS_SELECTOR, ".figures li:first-child .figure").text)
        check(active_before >= 3, f"{active_before} devices are active")
        browser.shot("fleet")
        # The rollout gate, without script: a GET form.
        contract = driver.find_element(By.ID, "gate-contract")
        check(contract.get_attribute("value") != "", "the rollout gate offers a contract")
        version = driver.find_element(By.ID, "gate-version")
        version.clear()
        version.send_keys("99")
        browser.submit("form:has(#gate-version)")
        gate = driver.find_element(By.CSS_SELECTOR, "#gate-heading ~ .result").text
        check("would be refused" in gate, f"the gate says what oldest_supported 99 would refuse: {gate!r}")
        browser.shot("rollout-gate")

        print("a device and its revocation")
        browser.open("/console")
        browser.click((By.LINK_TEXT, "tablet-ben"))
        check("Device tablet-ben" in browser.heading(), "the device page opens")
        device_page = browser.text()
        check("op-ben" in device_page and "fieldops-cli/1.3.0" in device_page, "it names the device's user and app")
        check("Conflicts open on the device 1" in device_page, "it shows the conflict the device reported")
        browser.shot("device")
        check(ben.status_of_request()[0] == 200, "tablet-ben's requests are answered before the revocation")
        browser.click((By.XPATH, "//button[contains(., 'Revoke device tablet-ben')]"))
        check("revoked" in driver.find_element(By.CSS_SELECTOR, ".notice").text, "the page says the device is revoked")
        status, code = ben.status_of_request()
        check(status == 401 and code == "token_revoked", f"tablet-ben's next request gets 401 token_revoked ({status} {code})")

        print("the census moves")
        dan = Device(server, work, "op-dan", "tablet-dan")
        dan.sync()
        browser.open("/console")
        check("tablet-dan" in browser.text(), "a device that synced since shows up in the census")
        active_after = int(driver.find_element(By.CSS_SELECTOR, ".figures li:first-child .figure").text)
        check(active_after == active_before + 1, f"the active count went from {active_before} to {active_after}")

        print("erasure needs confirmation")
        browser.open("/console/access")
        driver.find_element(By.ID, "erase-user").send_keys("learner-cleo")
        browser.submit("form[action='/console/erasures/confirm']")
        check("Erase the data of user learner-cleo?" in browser.heading(), "erasing asks for confirmation first")
        check("phone-cleo" in browser.text(), "the confirmation names the user's devices")
        browser.shot("erase-confirm")
        check(cleo.status_of_request()[0] == 200, "nothing is erased by the confirmation page")
        driver.find_element(By.ID, "confirm").send_keys("learner-cle")
        browser.submit("form[action='/console/erasures']")
        check("Nothing was erased" in browser.text(), "a mistyped id erases nothing")
        check(cleo.status_of_request()[0] == 200, "the user is still there")
        driver.find_element(By.ID, "confirm").send_keys("learner-cleo")
        browser.submit("form[action='/console/erasures']")
        check("User learner-cleo erased" in browser.heading(), "typing the id again erases")
        browser.shot("erased")
        status, code = cleo.status_of_request()
        check(status == 410 and code == "user_erased", f"the erased user's device is told 410 user_erased ({status} {code})")

        print("the other pages")
        browser.open("/console/access")
        check("tablet-ben" in browser.text() and "learner-cleo" in browser.text(), "revocations and erasures are listed")
        browser.shot("access")
        browser.open("/console/conflicts")
        conflicts = browser.text()
        check("tablet-ben" in conflicts and "conflicted" in conflicts and "team-1-task-swap-017" in conflicts,
              "the conflicts page shows ben's conflicted write")
        browser.shot("conflicts")
        browser.open("/console/audit")
        browser.submit("form[action='/console/audit/verify']")
        check("Audit log intact" in browser.text(), "Verify checks the audit log")
        browser.shot("audit")
        browser.open("/console/activity")
        check(len(driver.find_elements(By.CSS_SELECTOR, "svg[role=img]")) == 5, "the activity page draws five charts")
        browser.shot("activity")

        print("sessions")
        # Another admin's session, opened outside this browser.
        other_admin = server.token("ops-other", "console-other", admin=True)
        status, location, other_cookie = console_request(server, "/console/sign-in", form={"token": other_admin})
        check(status == 303 and other_cookie, f"another admin signs in ({status} {location})")
        check(console_request(server, "/console", cookie=other_cookie)[0] == 200, "the other admin's session opens pages")
        browser.click((By.LINK_TEXT, "Sessions"))
        check(browser.heading() == "Sessions", "the Sessions page opens from the navigation")
        sessions = browser.text()
        check("ops-admin (this session)" in sessions and "console-browser" in sessions, "it lists this session")
        check("ops-other" in sessions and "console-other" in sessions, "it lists the other admin's session")
        own_cookie = (driver.get_cookie("outpost_console") or {}).get("value", "")
        source = driver.page_source
        check(own_cookie and own_cookie not in source and other_cookie not in source, "no session id is on the page")
        browser.shot("sessions")
        browser.click((By.XPATH, "//button[contains(., 'End the session of ops-other')]"))
        check("The session is ended" in browser.text(), "ending the other admin's session says so")
        check("console-other" not in browser.text(), "the ended session is no longer listed")
        status, location, _ = console_request(server, "/console", cookie=other_cookie)
        check(status == 303 and location.startswith("/console/sign-in"), f"the ended session's next page goes to sign in ({status} {location})")
        check("ops-admin (this session)" in browser.text(), "this session goes on")

        print("signing out")
        browser.click_css(".sign-out button")
        check("You are signed out" in browser.text(), "signing out ends the session")
        browser.open("/console")
        check(driver.current_url.endswith("/console/sign-in"), "the console needs signing in again")

        check(not browser.problems, f"no console error or content security policy violation: {browser.problems}")
    except Exception:
        print(f"server log: {server.log_path}", file=sys.stderr)
        keep = True
        raise
    finally:
        if browser:
            browser.quit()
        server.stop()
        if keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", help="the folder of sync-server and sync-device (default: swift build --show-bin-path)")
    parser.add_argument("--screenshots", help="write a PNG of each page here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    bin_dir = args.bin or subprocess.run(["swift", "build", "--show-bin-path"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    if args.screenshots:
        os.makedirs(args.screenshots, exist_ok=True)
    started = time.monotonic()
    try:
        run(bin_dir, args.screenshots, args.keep)
    except (Failure, WebDriverException, subprocess.CalledProcessError) as error:
        print(f"console browser test FAILED: {error}", file=sys.stderr)
        sys.exit(1)
    print(f"console browser test passed in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
