#!/usr/bin/env python3
"""Checks the dashboard's rendered wiki in headless Chromium (--dump-dom: the
DOM as the browser holds it after loading the page, scripts and event
handlers included, under the dashboard's real security headers).

usage: wiki_render.py BROWSER PROFILE_DIR BASE_URL

Expects the demo's wiki (demo/todo) with a hostile page, Hostile.md, added by
a person (product-checks.sh pushes it): its heading, two links between pages
(by name and by file name, `.md`), a `[[wiki link]]`, a current and a stale
fact, a <script>, an <img onerror>, inline tags with handlers, javascript: and
data: links and an image from another host.

Asserts:
  - the wiki's index links every page, Hostile among them;
  - the demo's Home page renders its headings and lists, and no teammem marker
    is visible on it or on any page opened here;
  - each link between pages, with and without `.md`, opens the page it names
    (its own heading shows);
  - on the hostile page nothing ran: the title is the dashboard's, no element
    was added or changed by the page (no data-pwned), the DOM holds no
    <script>, <img>, <iframe> or <style> from the page, no on* attribute and
    no javascript:/data: link; the page's HTML shows as text; the stale fact
    is highlighted with the commit that changed it, the current one is not.
Exits non-zero with one line saying what was wrong.
"""
import subprocess
import sys
from html.parser import HTMLParser

browser, profile, base = sys.argv[1:4]
base = base.rstrip("/")


def dump(path):
    """The DOM of BASE_URL + path after Chromium loaded it."""
    result = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={profile}", "--dump-dom", base + path],
        capture_output=True, text=True, timeout=60,
    )
    if result.returncode != 0 or "<html" not in result.stdout:
        sys.exit(f"wiki_render.py: Chromium did not load {path}: {result.stderr[-2000:]}")
    return result.stdout


class Page(HTMLParser):
    """What a check needs from one dashboard page's DOM."""

    def __init__(self, html):
        super().__init__()
        self.title = ""
        self.tags = []  # (tag, attrs) of every element
        self.in_title = False
        self.article_depth = 0
        self.article_text = ""
        self.heading = None  # the article's first heading, as text
        self.in_heading = False
        self.links = []  # (href, text) in the article
        self.link = None
        self.marks = []  # text of each <mark class=stale>
        self.mark = None
        self.notes = []  # text of each stale note
        self.note = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        classes = (attrs.get("class") or "").split()
        if tag == "title":
            self.in_title = True
        if tag == "article" and "wiki" in classes:
            self.article_depth = 1
            return
        if self.article_depth:
            self.article_depth += 1
            if tag in ("h1", "h2") and self.heading is None:
                self.heading = ""
                self.in_heading = True
            if tag == "a":
                self.link = [attrs.get("href", ""), ""]
            if tag == "mark" and "stale" in classes:
                self.mark = ""
            if tag == "span" and "stale-note" in classes:
                self.note = ""

    def handle_endtag(self, tag):
        if tag == "title":
            self.in_title = False
        if not self.article_depth:
            return
        self.article_depth -= 1
        if tag in ("h1", "h2"):
            self.in_heading = False
        if tag == "a" and self.link is not None:
            self.links.append(tuple(self.link))
            self.link = None
        if tag == "mark" and self.mark is not None:
            self.marks.append(self.mark)
            self.mark = None
        if tag == "span" and self.note is not None:
            self.notes.append(self.note)
            self.note = None

    def handle_data(self, data):
        if self.in_title:
            self.title += data
        if not self.article_depth:
            return
        self.article_text += data
        if self.in_heading:
            self.heading += data
        for open_text in (self.link, ):
            if open_text is not None:
                open_text[1] += data
        if self.mark is not None:
            self.mark += data
        if self.note is not None:
            self.note += data


def fail(message):
    sys.exit(f"wiki_render.py: {message}")


def open_page(path):
    page = Page(dump(path))
    if "teammem:" in page.article_text:
        fail(f"{path} shows a teammem marker: {page.article_text[:300]!r}")
    return page


# The index.
index = Page(dump("/wiki/demo/todo/"))
hrefs = {href for tag, attrs in index.tags if tag == "a" for href in [attrs.get("href")]}
for name in ("Home", "Changelog", "Area-api", "Hostile"):
    if f"/wiki/demo/todo/{name}" not in hrefs:
        fail(f"the wiki's index does not link {name}: {sorted(h for h in hrefs if h)}")
print(f"index: {len([h for h in hrefs if h and h.startswith('/wiki/demo/todo/')])} page links")

# The demo's Home page, rendered.
home = open_page("/wiki/demo/todo/Home")
headings = [tag for tag, _ in home.tags if tag in ("h1", "h2")]
if home.heading != "todo" or headings.count("h2") < 2:
    fail(f"Home renders no headings (first {home.heading!r}, tags {headings})")
if not any(tag == "li" for tag, _ in home.tags):
    fail("Home renders no list")
print(f"Home: heading {home.heading!r}, {headings.count('h2')} sections, no marker shown")

# The hostile page.
hostile = open_page("/wiki/demo/todo/Hostile")
if hostile.title != "Hostile.md · teammem":
    fail(f"the hostile page changed the title: {hostile.title!r}")
for tag, attrs in hostile.tags:
    if tag in ("script", "img", "iframe", "object", "embed", "svg") or (tag == "style" and attrs):
        fail(f"the hostile page's DOM holds a <{tag}> {attrs}")
    handlers = [a for a in attrs if a.startswith("on")]
    if handlers:
        fail(f"<{tag}> carries event handler attributes {handlers}")
    if any(a.startswith("data-pwned") for a in attrs):
        fail(f"a script of the page ran: <{tag}> {attrs}")
    href = (attrs.get("href") or "").strip().lower()
    if href.startswith(("javascript:", "data:", "vbscript:")):
        fail(f"a script-capable link: <{tag} href={href!r}>")
styles = [tag for tag, _ in hostile.tags if tag == "style"]
if len(styles) != 1:
    fail(f"the page has {len(styles)} <style> elements; only the dashboard's own one belongs")
for shown in ("<script>document.title='pwned'</script>", "<img src=x onerror="):
    if shown not in hostile.article_text:
        fail(f"the page's HTML {shown!r} is not shown as text")
if hostile.heading != "Hostile page":
    fail(f"the hostile page's heading is {hostile.heading!r}")
if hostile.marks != ["An old fact."] or not hostile.notes or not hostile.notes[0].startswith("stale: changed in bbbbbbb"):
    fail(f"the stale fact is not highlighted as it should be: marks {hostile.marks}, notes {hostile.notes}")
if "A fresh fact." in hostile.marks:
    fail("a current fact is highlighted as stale")
image_links = [href for href, text in hostile.links if text.startswith("image")]
if image_links != ["https://tracker.invalid/p.gif"]:
    fail(f"the image from another host is not a plain link: {hostile.links}")
print(f"hostile page: title {hostile.title!r}, nothing ran, its HTML shown as text, stale fact marked ({hostile.notes[0]})")

# Links between pages, with and without `.md`, and a [[wiki link]].
expected = {"by name": "todo", "with md": "Changelog", "Area-api": "Area: api"}
for text, heading in expected.items():
    href = next((h for h, t in hostile.links if t == text), None)
    if href is None:
        fail(f"the hostile page has no link {text!r}: {hostile.links}")
    if not href.startswith("/wiki/demo/todo/"):
        fail(f"the link {text!r} leaves the wiki: {href}")
    target = open_page(href)
    if target.heading != heading:
        fail(f"the link {text!r} ({href}) opens a page headed {target.heading!r}, not {heading!r}")
    print(f"link {text!r} → {href}: {target.heading!r}")
print("wiki in the browser: ok")
