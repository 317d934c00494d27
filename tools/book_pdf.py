"""Print the built book as a PDF to read and to print: a title page, a table of contents with
page numbers, bookmarks for its parts, chapters and sections, and every page of the site in
the order of the table of contents.

Usage (what ``make pdf`` runs after ``make book``)::

    python tools/book_pdf.py [--html _build/html] [--out _build/pdf/token-dynamics.pdf]
                             [--api omit|only|append]

Each page of the built site is opened in Debian's headless Chromium, offline, exactly as a reader
sees it: MathJax has typeset the maths, sphinx-proof has numbered the statements (Theorem 3.2),
figures and the bibliography are there. The page is then laid out for paper (`PRINT_LAYOUT`): a
display formula wider than the printed line is scaled down, to 60% at most, and else let wrap
(one that overflows even so is reported: `Book.unfit`, and the tool's last lines, as is an
inline formula wider than its line, which MathJax cannot break and the page clips); an animation
is shown by its first and last frames, captioned; an explorer (token_dynamics.widgets) by its
frame, captioned with the parameter values it shows; a heading is kept with a short block after
it, and a tall block kept whole inside another (a code cell's code in its frame, a table in a
folded admonition) breaks where the block around it must; a line of code too long for the page
wraps and goes on at its indentation after a hook, and a block of code taller than a third of
the page (`TALL_CELL`) may break between two of its lines. It is printed on A4 with its
navigation hidden and its folded solutions unfolded (the student edition has none to unfold),
its pages numbered on from the previous page's, its title in the running head.

The book's structure is the site's own: the parts, chapters and sections of its navigation, which
Sphinx derives from ``_toc.yml``, checked against the chain of "next" links as the pages are
printed. Once every page is printed, and so its first page number known, the title page and the
contents (front matter, numbered i, ii, ...) are written as HTML, printed by the same Chromium
and put in front; pypdf joins the pages, adds the outline (part > chapter > section), the page
labels (the viewer's page numbers are the printed ones), the metadata, and turns the links
between pages of the site into links inside the PDF, and those to a page left out (the API
reference) into links to it on the published site.

The API reference (``book/api/``: one page per module of the library) is left out by default;
``--api only`` prints it as a PDF of its own, ``--api append`` keeps it at the end of the book.

Needs ``/usr/bin/chromium`` (``make chromium``) and pypdf (requirements-dev.txt).
"""

from __future__ import annotations

import argparse
import functools
import html as markup
import http.server
import io
import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urljoin, urlsplit

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
# Chromium flags for a closed network (the same as the browser tests): no background
# connections, no sandbox when run as root.
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# A page that has not typeset its maths within this time has a broken MathJax: fail, not hang.
TIMEOUT_MS = 60_000
# The pages of the API reference, relative to the site: its index and one page per module.
API = "book/api/"
API_CHOICES = ("omit", "only", "append")
# The PDF's metadata beyond the title and authors, which come from the site (_config.yml).
SUBJECT = (
    "Deep transformers as interacting particle systems: the mean-field Transformer PDE, "
    "clustering, Gaussian solutions, gradient-flow structure, noise and synchronization, "
    "exact sequence interpolation; with the Python library token_dynamics"
)
API_SUBJECT = "The API reference of token_dynamics, the Python library of the book"
KEYWORDS = (
    "transformers; self-attention; interacting particle systems; mean-field limit; "
    "clustering; Wasserstein gradient flow; stochastic differential equations; "
    "synchronization; interpolation"
)
# Links of the contents pages point here (a page number after the slash) while they are
# printed; they become links to that page of the PDF once the book is assembled.
PAGE_LINK = "https://page.invalid/"
# The screen's chrome (header, sidebars, buttons, previous/next links, the theme's printed
# "Contents" list of the page) has no place on paper; folded content (solutions, hidden cells'
# outputs, <details>) is printed unfolded; a table's row is not split between two pages, a box's
# title (a statement's, a dropdown's) not from its first lines; an image to which the page
# gives a width and a height keeps its proportions where it is narrowed to the line. A long line
# of code wraps instead of being cut, and goes on at its indentation after a hook (as
# LaTeX's listings with breaklines and postbreak): PRINT_LAYOUT makes each line of a <pre> a
# `.print-line` block with its indentation as `--indent`, the hanging indent leaves two columns
# more, and a hook (an SVG) is drawn in them, a picture, not text, so that code copied from
# the PDF has no mark in it. A line is not split between two pages, nor is a block of code
# after its first line or before its last. What the screen scrolls (a block of code, a table, a
# cell's output) is printed whole: Chromium neither breaks a scrolling box between pages nor
# prints what it scrolls out of view.
PRINT_CSS = """
@page {
  size: A4;
  margin: 16mm 15mm 18mm 15mm;
  @top-right { content: TITLE; font: 8pt sans-serif; color: #666; }
  @bottom-center { content: counter(page); font: 9pt sans-serif; color: #444; }
}
@page :first { counter-increment: page FIRST; @top-right { content: none; } }
html { width: WIDTHpx !important; }
.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .header-article, .bd-header-article,
.prev-next-area, .bd-footer, .bd-footer-article, .bd-footer-content, footer,
.toggle-button, button.toggle-button, .headerlink, .copybtn, #pst-back-to-top,
.search-button-field, .skip-link, #jb-print-toc { display: none !important; }
.bd-main, .bd-content, .bd-article-container, .bd-article { max-width: none !important; }
.toggle-hidden { display: block !important; visibility: visible !important;
  height: auto !important; opacity: 1 !important; }
pre, .pst-scrollable-table-container, div.output { overflow: visible !important; }
pre { white-space: pre-wrap !important; overflow-wrap: anywhere; }
.print-line { display: block; position: relative; break-inside: avoid;
  padding-left: calc(var(--indent) + 2ch); text-indent: calc(-1 * (var(--indent) + 2ch)); }
.print-line::before { content: ""; position: absolute; left: var(--indent); width: 2ch;
  top: 1lh; bottom: 0; background: left top / 2ch 1lh repeat-y url("data:image/svg+xml,\
%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 20'%3E%3Cpath d='M5 3v9h8M10 9l3 3-3 3' \
fill='none' stroke='%23888' stroke-width='1.5'/%3E%3C/svg%3E"); }
.print-line:first-child { break-after: avoid; }
.print-line:last-child { break-before: avoid; }
.cell_input, .cell_output, img, figure, mjx-container[display="true"], div.math, tr {
  break-inside: avoid; }
h1, h2, h3, h4, h5, h6, .print-label, .admonition-title, summary { break-after: avoid; }
img[style*="width"] { height: auto !important; }
h1, h2, h3, h4, h5, h6 { break-inside: avoid; }
.print-keep { break-inside: avoid; }
.print-label { font: 600 11pt sans-serif; color: #666; letter-spacing: 0.04em; margin: 0 0 2mm; }
mjx-container[display="true"].print-wrapped mjx-math { white-space: normal !important;
  line-height: normal !important; }
.animation, .td-explorer label { display: none !important; }
.td-explorer img { display: block; margin: 0 auto; }
.print-frames { display: flex; flex-wrap: wrap; justify-content: center; gap: 4mm;
  break-inside: avoid; margin: 2mm 0 4mm; }
.print-frames figure { margin: 0; text-align: center; max-width: calc(50% - 2mm); }
.print-frames img { max-width: 100%; height: auto; }
.print-frames figcaption, .print-frame-caption { font: 9pt sans-serif; color: #444;
  margin: 1mm 0 0; text-align: center; }
"""
# The title page (no number) and the contents (ii, iii, ...), in the site's fonts.
FRONT_CSS = """
@page {
  size: A4;
  margin: 22mm 20mm 20mm 20mm;
  @bottom-center { content: counter(page, lower-roman); font: 9pt sans-serif; color: #444; }
}
@page :first { @bottom-center { content: none; } }
body { font-family: var(--pst-font-family-base, sans-serif); color: #222; }
a { color: inherit; text-decoration: none; }
.title-page { break-after: page; text-align: center; padding-top: 70mm; }
.title-page h1 { font-size: 30pt; margin: 0 0 6mm; }
.title-page .subtitle { font-size: 16pt; margin: 0 0 30mm; }
.title-page .authors { font-size: 13pt; margin: 0 0 4mm; }
.title-page .edition, .title-page .copyright, .title-page .online { font-size: 10pt; color: #555;
  margin: 0 0 2mm; }
.contents h2 { font-size: 20pt; margin: 0 0 8mm; }
.contents .part { font-weight: bold; font-size: 12pt; margin: 6mm 0 2mm; break-after: avoid; }
.contents a { display: flex; align-items: baseline; font-size: 10.5pt; margin: 1.2mm 0; }
.contents .level-1 { font-weight: 600; margin-top: 2.5mm; }
.contents .level-2 { padding-left: 8mm; }
.contents .level-3 { padding-left: 16mm; font-size: 9.5pt; }
.contents .leader { flex: 1; border-bottom: 1px dotted #999; margin: 0 2mm; min-width: 8mm; }
"""
# The book's structure, read from the site's navigation in document order: each part's caption,
# then each entry with its depth (1 a chapter, 2 a section) and its link; the home link first.
READ_NAVIGATION = """() => {
  const nav = document.querySelector('nav.bd-docs-nav');
  if (!nav) return null;
  const found = [];
  for (const el of nav.querySelectorAll('p.caption, li[class*="toctree-l"] > a')) {
    const title = el.textContent.replace(/\\s+/g, ' ').trim();
    if (el.matches('p.caption')) { found.push({title, level: 0, href: null}); continue; }
    const level = Number(el.parentElement.className.match(/toctree-l(\\d+)/)[1]);
    found.push({title, level, href: el.href.split('#')[0]});
  }
  return found;
}"""
# The site's title and authors, as its sidebar and footer show them, and the page's address on
# the published site (its canonical link, from `html.baseurl`; none in the student edition).
READ_BOOK = """() => {
  const text = s => { const el = document.querySelector(s);
    return el ? el.textContent.replace(/\\s+/g, ' ').trim() : ''; };
  const canonical = document.querySelector('link[rel="canonical"]');
  return {title: text('.logo__title') || document.title,
          authors: text('.component-author').replace(/^By /, ''),
          copyright: text('.copyright'),
          canonical: canonical ? canonical.href : ''};
}"""

# The layout of the print: the A4 page (210 mm) in CSS pixels (96 per inch) is the viewport,
# its text (180 mm between the margins of PRINT_CSS) the width a block may take.
VIEWPORT = 794
PRINT_WIDTH = 680
# A display formula wider than its line is scaled down, to this fraction of its size at most;
# one still too wide is let wrap between its terms; one that overflows even so is reported.
MIN_MATH_SCALE = 0.6
# A heading is kept on the page of the block after it when that block is at most this tall
# (CSS pixels, about a third of the page's 994); a taller one may break after its first lines.
# A block kept whole (break-inside: avoid) inside another kept whole is kept so only up to this
# height too: when the outer one must break (taller than the room below its heading, or than a
# page), Chromium moves a tall inner one whole to the next page and leaves the outer one's first
# part an empty box (a code cell's frame, a folded admonition's title), a page or most of one.
KEEP_WITH_NEXT = 330
# The height of the printed page's text: the A4 page's 297 mm less the margins of PRINT_CSS
# (16 mm and 18 mm), in CSS pixels.
PAGE_HEIGHT = 994
# A code cell's code, or its output, taller than this fraction of the page may break across
# pages, between two of its lines (PRINT_CSS); a shorter one is kept whole. Kept whole, a cell
# that does not fit below what precedes it moves to the next page and leaves the rest of this one
# blank: up to this fraction of a page, where a cell almost a page tall left most of one. So too
# a box (a statement, a proof, an exercise, a dropdown of the checks page) or a table: a taller
# one may break, between two lines or rows, its title kept with its first lines.
TALL_CELL = 1 / 3
# A figure does not break: one that does not fit below what precedes it moves to the next page.
# Where the room it leaves would hold it at this fraction of its size or more, it is shrunk into
# that room instead, where a figure almost a page tall left most of a page blank.
MIN_FIGURE_SCALE = 0.6
# What the screen shows as moving or switching becomes, on paper: an animation (matplotlib's
# jshtml player) its first and last frames, captioned; an explorer (token_dynamics.widgets'
# static view) the frame it shows, captioned with its parameters' values, without its controls.
# Display formulas are fitted to the printed line (see MIN_MATH_SCALE), and inline formulas that
# reach past their line's end are found (the source must set them as display maths); each line
# of code is made
# a block (PRINT_CSS); a block of code, a box or a table taller than `tallCell` (TALL_CELL) may
# break; a heading is kept with a short block after it, and a block inside another kept whole is
# kept whole itself only when short (KEEP_WITH_NEXT), but for a figure; each figure is marked
# (FIT_FIGURE). Returns what was done, the formulas that overflow, and where the article starts.
PRINT_LAYOUT = r"""({width, minScale, keepWithNext, tallCell}) => {
  const done = {unfit: [], scaled: 0, wrapped: 0, animations: 0, explorers: 0, continued: 0,
                divided: 0, opened: 0, kept: 0, released: 0};
  const article = document.querySelector('article.bd-article') || document.body;
  // laid out as printed: the media queries of the page's width, the width between its margins
  // (PRINT_CSS); were the page wider, each block would be `excess` wider than on paper
  const excess = Math.max(0, document.documentElement.getBoundingClientRect().width - width);
  const tex = box => {
    try {
      const items = MathJax.startup.document.getMathItemsWithin(box);
      if (items.length) return items[0].math.trim();
    } catch (e) {}
    return box.textContent.trim();
  };
  for (const box of document.querySelectorAll('mjx-container[display="true"]')) {
    const math = box.querySelector('mjx-math');
    if (!math || box.getClientRects().length === 0) continue;  // not shown
    const host = box.closest('div.math') || box.parentElement;
    const eqno = host.querySelector(':scope > .eqno');
    const room = box.clientWidth - excess - (eqno ? eqno.offsetWidth + 8 : 0);
    const natural = math.getBoundingClientRect().width;
    if (natural <= room) continue;
    const scale = Math.max(minScale, room / natural);
    box.style.fontSize = (parseFloat(getComputedStyle(box).fontSize) * scale).toFixed(2) + 'px';
    box.style.overflow = 'visible';
    done.scaled += 1;
    if (math.getBoundingClientRect().width <= room + 0.5) continue;
    box.classList.add('print-wrapped');
    math.style.display = 'block';
    math.style.maxWidth = room + 'px';
    done.wrapped += 1;
    let right = 0;
    for (const el of math.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (r.width) right = Math.max(right, r.right);
    }
    const wide = right - math.getBoundingClientRect().left;
    if (wide > room + 0.5) {
      done.unfit.push({tex: tex(box), width: Math.round(natural), room: Math.round(room),
                       inline: false});
    }
  }
  // an inline formula does not break: one wider than its line reaches past the line's end (the
  // block around it, less its padding and border), where the page clips it
  for (const box of article.querySelectorAll('mjx-container:not([display="true"])')) {
    const rects = [...box.getClientRects()];
    if (!rects.length) continue;  // not shown
    let block = box.parentElement;
    while (getComputedStyle(block).display.startsWith('inline')) block = block.parentElement;
    const style = getComputedStyle(block);
    const edge = block.getBoundingClientRect().right - parseFloat(style.paddingRight) -
      parseFloat(style.borderRightWidth);
    if (Math.max(...rects.map(r => r.right)) > edge + 1) {
      done.unfit.push({tex: tex(box), width: Math.round(box.getBoundingClientRect().width),
                       room: Math.round(block.clientWidth - parseFloat(style.paddingLeft) -
                                        parseFloat(style.paddingRight)),
                       inline: true});
    }
  }
  const caption = (figure, text) => {
    const c = document.createElement('figcaption');
    c.textContent = text;
    figure.append(c);
  };
  for (const player of document.querySelectorAll('div.animation')) {
    const img = player.querySelector('img[id^="_anim_img"]');
    if (!img) continue;
    const id = img.id.replace('_anim_img', '');
    let frames = (window['anim' + id] || {}).frames;
    frames = frames ? Array.from(frames, f => f.src) : [];
    if (!frames.length) {  // the player is not started: read its frames from its script
      for (const s of document.scripts) {
        if (!s.textContent.includes('"_anim_img' + id + '"')) continue;
        for (const m of s.textContent.matchAll(/frames\[(\d+)\] = "([^"]+)"/g)) {
          frames[Number(m[1])] = m[2].replace(/\\\n/g, '');
        }
      }
    }
    if (!frames.length) continue;
    const shown = document.createElement('div');
    shown.className = 'print-frames';
    const last = frames.length - 1;
    const ends = last > 0 ? [0, last] : [0];
    for (const k of ends) {
      const figure = document.createElement('figure');
      const frame = document.createElement('img');
      frame.src = frames[k];
      frame.alt = (k ? 'Last' : 'First') + ' frame of the animation';
      figure.append(frame);
      caption(figure, (k ? 'Last frame' : 'First frame') +
        ` (${k + 1} of ${frames.length})`);
      shown.append(figure);
    }
    player.after(shown);
    done.animations += 1;
  }
  for (const explorer of document.querySelectorAll('.td-explorer')) {
    const values = [];
    for (const label of explorer.querySelectorAll('label')) {
      const control = label.querySelector('[data-control]');
      if (!control) continue;
      const name = (label.firstChild && label.firstChild.textContent || '').trim();
      let value;
      if (control.tagName === 'SELECT') {
        value = control.options[control.selectedIndex].textContent;
      } else {
        const out = label.querySelector('output');
        value = out ? out.textContent : control.value;
      }
      values.push(`${name} = ${value.trim()}`);
    }
    const img = explorer.querySelector('img');
    if (!values.length) continue;
    const line = document.createElement('p');
    line.className = 'print-frame-caption';
    line.textContent = 'Frame shown: ' + values.join(', ');
    (img || explorer.lastElementChild).after(line);
    done.explorers += 1;
  }
  // each line of code a block of its own (PRINT_CSS: a wrapped line goes on at its indentation
  // after a hook), its text and the elements around it (the highlighter's) unchanged
  for (const pre of article.querySelectorAll('pre')) {
    const open = [];  // the elements around the text being copied, outermost first
    const lines = [];
    let at;  // where the text goes: the innermost copy of `open` in the last line
    const newLine = () => {
      const line = document.createElement('span');
      line.className = 'print-line';
      lines.push(line);
      at = line;
      for (const el of open) at = at.appendChild(el.cloneNode(false));
    };
    const copy = node => {
      for (const child of node.childNodes) {
        if (child.nodeType === Node.ELEMENT_NODE) {
          at = at.appendChild(child.cloneNode(false));
          open.push(child);
          copy(child);
          open.pop();
          at = at.parentNode;
        } else if (child.nodeType === Node.TEXT_NODE) {
          child.data.split('\n').forEach((part, k) => {
            if (k) { at.append('\n'); newLine(); }
            if (part) at.append(part);
          });
        }
      }
    };
    newLine();
    copy(pre);
    if (!lines[lines.length - 1].textContent) lines.pop();  // after the last newline
    for (const line of lines) {
      line.style.setProperty('--indent', `min(${line.textContent.search(/\S|$/)}ch, 50%)`);
    }
    pre.replaceChildren(...lines);
    const height = parseFloat(getComputedStyle(pre).lineHeight);
    done.continued += lines.filter(line => line.offsetHeight > 1.5 * height).length;
  }
  // a block of code (a cell's code or its output, else a literal block) taller than `tallCell`
  // may break across pages, between two of its lines; a shorter one is kept whole
  const divided = new Set();
  for (const pre of article.querySelectorAll('pre')) {
    const block = pre.closest('.cell_input, .cell_output') ||
      pre.closest('div[class*="highlight-"]') || pre;
    if (block.getBoundingClientRect().height <= tallCell) continue;
    for (let el = pre; el !== block.parentElement; el = el.parentElement) {
      el.style.breakInside = 'auto';
    }
    divided.add(block);
  }
  done.divided = divided.size;
  const whole = el => getComputedStyle(el).breakInside === 'avoid';
  // a box kept whole (a statement, a proof, an exercise, a table) taller than `tallCell` may
  // break across pages, its title kept with its first lines (PRINT_CSS); a shorter one is kept
  // whole
  for (const box of article.querySelectorAll('.admonition, table')) {
    if (!whole(box) || box.getBoundingClientRect().height <= tallCell) continue;
    box.style.breakInside = 'auto';
    done.opened += 1;
  }
  // a tall block kept whole inside another kept whole may break, but for a figure: its caption
  // stays with its image
  for (const el of article.querySelectorAll(':not(figure)')) {
    if (el.getBoundingClientRect().height <= keepWithNext || !whole(el)) continue;
    let outer = el.parentElement;
    while (outer && outer !== article && !whole(outer)) outer = outer.parentElement;
    if (!outer || outer === article) continue;
    el.style.breakInside = 'auto';
    done.released += 1;
  }
  const headings = article.querySelectorAll('h2, h3, h4, h5, h6');
  for (const h of headings) {
    const next = h.nextElementSibling;
    if (!next || next.matches('section') || h.parentElement.matches('.print-keep')) continue;
    const height = next.getBoundingClientRect().height;
    if (height > keepWithNext) {
      // a taller one starts with its first line on the heading's page, not with the empty top
      // of its frame (a code cell's, a box's)
      for (let el = next.firstElementChild; el; el = el.firstElementChild) {
        el.style.breakBefore = 'avoid';
      }
      continue;
    }
    const keep = document.createElement('div');
    keep.className = 'print-keep';
    h.before(keep);
    keep.append(h, next);
    done.kept += 1;
  }
  // nothing below the article's last block: its margin, which the article keeps, would make a
  // page of its own where that block ends a page
  for (let el = article; el; ) {
    el = [...el.children].filter(child => child.getBoundingClientRect().height > 0).pop();
    if (el) el.style.marginBottom = '0';
  }
  // each figure (an image with its caption, an animation's frames, an image alone), with the
  // blocks kept whole around it (a cell's output), between two empty marks, which a hidden link
  // names in the PDF: `figure_rooms` reads there where each is printed, FIT_FIGURE shrinks one
  // moved whole to the next page; and a mark where the article starts, on the first page where
  // the screen has it
  const units = new Set();
  for (const img of article.querySelectorAll('img')) {
    if (!img.getClientRects().length) continue;
    let unit = img.closest('.print-frames, figure') || img;
    for (let el = unit.parentElement; el !== article; el = el.parentElement) {
      if (whole(el)) unit = el;
    }
    units.add(unit);
  }
  const links = document.createElement('div');
  links.hidden = true;
  const mark = (id, place) => {
    const el = document.createElement('div');
    el.id = id;
    place(el);
    const link = document.createElement('a');
    link.href = '#' + id;
    links.append(link);
    return el;
  };
  done.top = mark('print-top', el => article.prepend(el)).getBoundingClientRect().top + scrollY;
  [...units].forEach((unit, k) => {
    mark(`print-figure-${k}-before`, el => unit.before(el));
    mark(`print-figure-${k}-after`, el => unit.after(el));
  });
  article.append(links);
  done.figures = units.size;
  return done;
}"""
# A figure printed on the page after the one where it comes, where the room left at the foot of
# that page (`rooms`: figure number, room in CSS pixels) would hold it with its images at `least`
# of their size or more, is shrunk into that room: the first such figure, once (the pages after
# it change). Returns whether one was.
FIT_FIGURE = """({rooms, least}) => {
  for (const [k, room] of rooms) {
    const mark = document.getElementById(`print-figure-${k}-before`);
    const unit = mark.nextElementSibling;
    if (unit.dataset.printFitted) continue;
    const images = unit.matches('img') ? [unit] : [...unit.querySelectorAll('img')];
    // from the mark, where the room starts: with the margin above the figure
    const height = unit.getBoundingClientRect().bottom - mark.getBoundingClientRect().top;
    const tallest = Math.max(...images.map(img => img.getBoundingClientRect().height));
    // one image, or images in a row (an animation's two frames), shrunk by `scale`, leave the
    // rest (a caption) as it is; less two pixels for rounding
    const scale = (room - 2 - (height - tallest)) / tallest;
    if (!(scale >= least && scale < 1)) continue;
    for (const img of images) {
      const {width, height} = img.getBoundingClientRect();
      img.style.setProperty('width', (width * scale).toFixed(1) + 'px', 'important');
      img.style.setProperty('height', (height * scale).toFixed(1) + 'px', 'important');
    }
    unit.dataset.printFitted = 'yes';
    return true;
  }
  return false;
}"""

# Folded content is unfolded before the print is laid out, as it is printed (PRINT_LAYOUT measures
# its blocks): each <details> opened, each folded admonition or cell (sphinx-togglebutton's: a
# solution, a dropdown of the checks page, which it unfolds itself only when printing) unfolded.
UNFOLD = """() => {
  document.querySelectorAll('details').forEach(d => d.open = true);
  document.querySelectorAll('.toggle-hidden').forEach(el => el.classList.remove('toggle-hidden'));
}"""
# Lines printed above a page's title (its chapter's number, its part's name).
LABEL_HEADING = """labels => {
  // the theme prints its own copy of the title (#jb-print-docs-body) above the article's
  const h1 = document.querySelector('#jb-print-docs-body h1') ||
    document.querySelector('article h1') || document.querySelector('h1');
  for (const label of labels) {
    const line = document.createElement('p');
    line.className = 'print-label';
    line.textContent = label;
    h1.before(line);
  }
}"""


class Entry(NamedTuple):
    """One line of the book's table of contents: a page of the site, or a part's caption."""

    title: str
    level: int  # 0 a part's caption, 1 a chapter (or the front page), 2 a section, ...
    path: str | None  # the page relative to the site (``book/x.html``); None for a caption


class Printed(NamedTuple):
    """A page of the site as printed: its entry in the contents, its part, its PDF pages
    (``first`` is the number printed on its first page, counted from the book's first page)."""

    entry: Entry
    part: str | None
    first: int
    pages: int

    @property
    def path(self) -> str:
        return self.entry.path or ""


class Unfit(NamedTuple):
    """A formula that overflows the printed line: a display formula too wide for it even at
    ``MIN_MATH_SCALE`` of its size and let wrap, or an `inline` one wider than its line (which
    cannot break): its page, its TeX, its width and the line's (CSS pixels, at full size)."""

    path: str
    tex: str
    width: int
    room: int
    inline: bool


class Book(NamedTuple):
    """What `print_book` made: the book's pages as printed, the number of front-matter pages
    (title and contents) before them, the metadata written into the PDF, the formulas that
    overflow the printed line (`Unfit`), and the counts of what the print layout changed
    (``scaled`` and ``wrapped`` formulas, ``animations``, ``explorers``, lines of code
    ``continued`` on the next line, tall blocks of code ``divided`` between pages, headings
    ``kept`` with the block after them, tall blocks inside blocks kept whole ``released`` to
    break, tall boxes and tables ``opened`` to break, figures ``fitted`` into the room left at
    the foot of a page)."""

    printed: list[Printed]
    front: int
    metadata: dict[str, str]
    unfit: list[Unfit]
    layout: dict[str, int]


@contextmanager
def serve(html: Path) -> Iterator[str]:
    """Serve `html` on 127.0.0.1 for the lifetime of the context; yield its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def pdf_pages(path: Path) -> int:
    """The number of pages of the PDF at `path`."""
    from pypdf import PdfReader

    return len(PdfReader(path).pages)


def first_page(html: Path) -> str:
    """The site's first page, relative to `html` (where ``index.html`` redirects to)."""
    index = (html / "index.html").read_text(encoding="utf-8")
    marker = "url="
    if marker not in index:
        raise ValueError(f"{html / 'index.html'} does not redirect to the book's first page")
    return index.split(marker, 1)[1].split('"', 1)[0].strip()


def select(entries: Sequence[Entry], api: str) -> list[tuple[Entry, str | None]]:
    """The pages of `entries` that `api` keeps (``omit``: all but the API reference, ``only``:
    the API reference alone, ``append``: all), each with the caption of its part."""
    if api not in API_CHOICES:
        raise ValueError(f"`api` must be one of {API_CHOICES}, not {api!r}")
    chosen: list[tuple[Entry, str | None]] = []
    part = None
    for entry in entries:
        if entry.path is None:
            part = entry.title
            continue
        in_api = entry.path.startswith(API)
        if api == "append" or (api == "only") == in_api:
            # the API reference alone has no part: its index is the top of its outline
            chosen.append((entry, None if api == "only" else part))
    if not chosen:
        raise ValueError(f"no page of the site is left to print with `--api {api}`")
    return chosen


def front_matter(book: dict[str, str], printed: Sequence[Printed], *, api_only: bool) -> str:
    """The title page and the contents as one HTML document; each line of the contents links
    to its page (``PAGE_LINK`` followed by the page number) and shows the number. The title page
    gives the address of the published site (``book["online"]``) when there is one: the book's
    pages speak of its buttons, notebooks and animations."""
    esc = markup.escape
    title, _, subtitle = book["title"].partition(": ")
    subtitle = subtitle[:1].upper() + subtitle[1:]
    edition = "API reference" if api_only else ""
    lines = []
    part = None
    for page in printed:
        if page.part != part and page.part is not None:
            lines.append(f'<p class="part">{esc(page.part)}</p>')
        part = page.part
        lines.append(
            f'<a class="level-{page.entry.level}" href="{PAGE_LINK}{page.first}">'
            f'<span class="title">{esc(page.entry.title)}</span><span class="leader"></span>'
            f'<span class="number">{page.first}</span></a>'
        )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(book['title'])}</title><style>{FRONT_CSS}</style></head><body>"
        f'<section class="title-page"><h1>{esc(title)}</h1>'
        f'<p class="subtitle">{esc(subtitle)}</p>'
        f'<p class="authors">{esc(book["authors"])}</p>'
        + (f'<p class="edition">{esc(edition)}</p>' if edition else "")
        + f'<p class="copyright">{esc(book["copyright"])}</p>'
        + (
            f'<p class="online">Online, with its notebooks: <a href="{esc(online)}">'
            f"{esc(online)}</a></p>"
            if (online := book.get("online"))
            else ""
        )
        + "</section>"
        '<section class="contents"><h2>Contents</h2>' + "".join(lines) + "</section>"
        "</body></html>"
    )


def print_book(
    html: Path, out: Path, *, api: str = "omit", chromium: Path = CHROMIUM, progress: bool = False
) -> Book:
    """Print the site built in `html` into the PDF `out`: the title page and contents, then
    every page of the table of contents that `api` keeps (see `select`), in its order."""
    from playwright.sync_api import sync_playwright

    if not (html / "index.html").exists():
        raise ValueError(f"no built site at {html}: run `make book` (or `make build`) first")
    if not chromium.exists():
        raise ValueError(f"no Chromium at {chromium}: run `make chromium` first")
    out.parent.mkdir(parents=True, exist_ok=True)
    printed: list[Printed] = []
    bodies: list[bytes] = []
    unfit: list[Unfit] = []
    layout: dict[str, int] = {}
    unfit: list[Unfit]
    layout: dict[str, int]
    with serve(html) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), args=ARGS)
        # laid out for print at the printed page's width, as Chromium evaluates the media
        # queries of the print: PRINT_LAYOUT measures the blocks there
        page = browser.new_page(viewport={"width": VIEWPORT, "height": 1123})
        page.emulate_media(media="print")
        # offline: a request that leaves the machine is refused (the site serves everything)
        page.route(
            "**/*",
            lambda route: (
                route.continue_() if route.request.url.startswith(base) else route.abort()
            ),
        )

        def relative(url: str) -> str:
            return urlsplit(url).path.removeprefix(urlsplit(base).path)

        page.goto(urljoin(base, first_page(html)), wait_until="networkidle", timeout=TIMEOUT_MS)
        book = page.evaluate(READ_BOOK)
        # the published site: the first page's canonical address without the page's path
        start, canonical = first_page(html), book.pop("canonical")
        book["online"] = canonical.removesuffix(start) if canonical.endswith(start) else ""
        found = page.evaluate(READ_NAVIGATION)
        if not found:
            raise ValueError(f"the first page of {html} has no navigation to read the book from")
        entries = [
            Entry(e["title"], e["level"], None if e["href"] is None else relative(e["href"]))
            for e in found
        ]
        order = [e.path for e in entries if e.path is not None]
        if len(set(order)) != len(order):
            raise ValueError(f"the site's navigation lists a page twice: {order}")
        next_number = 1
        for entry, part in select(entries, api):
            assert entry.path is not None  # select keeps pages only
            page.goto(urljoin(base, entry.path), wait_until="networkidle", timeout=TIMEOUT_MS)
            following = page.evaluate(
                "() => { const a = document.querySelector('a.right-next'); "
                "return a ? a.href.split('#')[0] : null; }"
            )
            after = order.index(entry.path) + 1
            expected = order[after] if after < len(order) else None
            if (following and relative(following)) != expected:
                raise ValueError(
                    f"the next link of {entry.path} leads to {following}, not to {expected} "
                    "as the site's navigation has it"
                )
            if page.locator("script[src*='mathjax/tex']").count():  # only pages with maths load it
                page.wait_for_function(
                    "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                    timeout=TIMEOUT_MS,
                )
                page.evaluate("() => MathJax.startup.promise")
            title = page.evaluate(
                "() => (document.querySelector('article h1') || document.querySelector('h1'))"
                ".innerText.replace(/#$/, '').trim()"
            )
            css = (
                PRINT_CSS.replace("TITLE", json.dumps(title))
                .replace("FIRST", str(next_number))
                .replace("WIDTH", str(PRINT_WIDTH))
            )
            page.add_style_tag(content=css)
            # a numbered chapter opens with its number, the first of a part with the part's name
            number = re.match(r"(\d+)\. ", entry.title)
            labels = [f"Chapter {number.group(1)}"] if entry.level == 1 and number else []
            if labels and part is not None and (not printed or printed[-1].part != part):
                labels.insert(0, part)
            page.evaluate(LABEL_HEADING, labels)
            page.evaluate(UNFOLD)
            done = page.evaluate(
                PRINT_LAYOUT,
                {
                    "width": PRINT_WIDTH,
                    "minScale": MIN_MATH_SCALE,
                    "keepWithNext": KEEP_WITH_NEXT,
                    "tallCell": TALL_CELL * PAGE_HEIGHT,
                },
            )
            unfit.extend(Unfit(entry.path, **found) for found in done.pop("unfit"))
            top, figures = done.pop("top"), done.pop("figures")
            done["fitted"] = 0
            while True:  # at most once a figure: FIT_FIGURE shrinks each once
                pdf = page.pdf(prefer_css_page_size=True, print_background=True)
                rooms = figure_rooms(pdf, figures, top) if figures else []
                fit = {"rooms": rooms, "least": MIN_FIGURE_SCALE}
                if not rooms or not page.evaluate(FIT_FIGURE, fit):
                    break
                done["fitted"] += 1
            for key, count in done.items():
                layout[key] = layout.get(key, 0) + count
            bodies.append(pdf)
            printed.append(Printed(entry, part, next_number, count_pages(bodies[-1])))
            next_number += printed[-1].pages
            if progress:
                print(f"{entry.path}: to page {next_number - 1}", file=sys.stderr)
        page.set_content(front_matter(book, printed, api_only=api == "only"))
        front = page.pdf(prefer_css_page_size=True, print_background=True)
        browser.close()
    title = book["title"] + (" — API reference" if api == "only" else "")
    metadata = {
        "/Title": title,
        "/Author": book["authors"],
        "/Subject": API_SUBJECT if api == "only" else SUBJECT,
        "/Keywords": KEYWORDS,
        "/Creator": "tools/book_pdf.py: the site printed by Chromium, joined by pypdf",
    }
    assemble(out, front, bodies, printed, metadata, base=base, online=book["online"])
    return Book(printed, count_pages(front), metadata, unfit, layout)


def figure_rooms(pdf: bytes, figures: int, top: float) -> list[tuple[int, float]]:
    """The figures among the `figures` marked by PRINT_LAYOUT that the page printed as `pdf`
    (its bytes) shows at the top of the page after the one where they come, each with the room
    left below that place (CSS pixels): where the PDF names their marks. `top` is where the
    article starts in the page laid out on screen, as on the first printed page: it places the
    PDF's positions in the page's text."""
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(pdf))
    named = reader.named_destinations

    def place(name: str) -> tuple[int, float]:
        """The page index of the mark `name` and its height in points from the foot."""
        dest = named.get(name) or named.get("/" + name)
        if dest is None:
            raise ValueError(f"Chromium named no place for the print's mark {name!r}")
        return reader.get_destination_page_number(dest), float(dest.top)

    _, origin = place("print-top")

    def at(name: str) -> tuple[int, float]:
        """The page index of the mark `name` and its height in the page's text (CSS pixels)."""
        page, height = place(name)
        return page, top + (origin - height) * 96 / 72

    rooms = []
    for k in range(figures):
        page, before = at(f"print-figure-{k}-before")
        # the figure ends on the next page, below its top (an empty mark after a figure that
        # ends its page may go to the top of the next)
        after, end = at(f"print-figure-{k}-after")
        if after == page + 1 and end > 1:
            rooms.append((k, PAGE_HEIGHT - before))
    return rooms


def count_pages(pdf: bytes) -> int:
    """The number of pages of the PDF `pdf` (its bytes)."""
    from pypdf import PdfReader

    return len(PdfReader(io.BytesIO(pdf)).pages)


def assemble(
    out: Path,
    front: bytes,
    bodies: Sequence[bytes],
    printed: Sequence[Printed],
    metadata: dict[str, str],
    *,
    base: str,
    online: str,
) -> None:
    """Join the front matter and the printed pages into `out`, with the outline, the page
    labels, the metadata, and links inside the PDF where the pages link to each other (to the
    published site `online`, where there is one, for a page left out: see `relink`)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    readers = [PdfReader(io.BytesIO(pdf)) for pdf in (front, *bodies)]
    firsts = []  # the PDF page index of each reader's first page
    for reader in readers:
        firsts.append(len(writer.pages))
        writer.append(reader, import_outline=False)
    offset = firsts[1] if len(firsts) > 1 else len(writer.pages)  # where page 1 of the book is
    # the viewer shows the printed numbers: i, ii, ... for the front matter, then 1, 2, ...
    writer.set_page_label(0, offset - 1, style="/r", start=1)
    writer.set_page_label(offset, len(writer.pages) - 1, style="/D", start=1)
    # the outline: the contents, then the parts, each with its chapters and their sections
    writer.add_outline_item(title="Contents", page_number=1)  # after the title page
    parts: dict[str, Any] = {}
    chain: list[Any] = []  # the open items: chain[k] is the last item of level k + 1
    for page in printed:
        parent = None
        if page.part is not None:
            if page.part not in parts:
                parts[page.part] = writer.add_outline_item(
                    title=page.part, page_number=offset + page.first - 1, bold=True
                )
            parent = parts[page.part]
        level = page.entry.level
        del chain[level - 1 :]
        if chain:
            parent = chain[-1]
        item = writer.add_outline_item(
            title=page.entry.title, page_number=offset + page.first - 1, parent=parent
        )
        chain.extend([item] * (level - len(chain)))
    paths = [None, *(page.path for page in printed)]
    relink(writer, readers, firsts, paths, base=base, online=online)
    writer.add_metadata(metadata)
    writer.page_mode = "/UseOutlines"  # the viewer opens with the bookmarks shown
    writer.compress_identical_objects()
    with out.open("wb") as file:
        writer.write(file)


def relink(
    writer: Any,
    readers: Sequence[Any],
    firsts: Sequence[int],
    paths: Sequence[str | None],
    *,
    base: str,
    online: str,
) -> None:
    """Point the links of the joined PDF in `writer` inside it: `readers` are the PDFs joined,
    the k-th from page index ``firsts[k]``, printed from the page ``paths[k]`` of the site
    served at `base` (None: the front matter), published at `online` (empty: not published).

    A link to a place on its own page names a destination of that page's PDF, where Chromium
    names them after the HTML ids, which recur from page to page: it is made explicit. A link
    to another page of the site leads to that page's place (or its start); a line of the
    contents (``PAGE_LINK``) to its page. A link to a page left out of the PDF (the API
    reference, the indexes) leads to that place on the published site; without one (the student
    edition), and for a link to a file that is not a page (a figure's image), it would lead to a
    server that is gone: it is dropped.
    """
    from pypdf.generic import ArrayObject, NameObject, NullObject, TextStringObject

    printed = {path: k for k, path in enumerate(paths) if path is not None}
    local = urlsplit(base).path

    def place(k: int, name: str) -> Any:
        """The explicit destination of `name` in the k-th PDF, or its first page."""
        named = readers[k].named_destinations
        dest = named.get(name) or named.get("/" + name) if name else None
        if dest is None:
            return ArrayObject([writer.pages[firsts[k]].indirect_reference, NameObject("/Fit")])
        at = firsts[k] + readers[k].get_destination_page_number(dest)
        left, top = dest.left, dest.top
        return ArrayObject(
            [
                writer.pages[at].indirect_reference,
                NameObject("/XYZ"),
                NullObject() if left is None else left,
                NullObject() if top is None else top,
                NullObject(),
            ]
        )

    for index, pdf_page in enumerate(writer.pages):
        if "/Annots" not in pdf_page:
            continue
        source = max(k for k, first in enumerate(firsts) if first <= index)
        kept = ArrayObject()
        for ref in pdf_page["/Annots"]:
            annotation = ref.get_object()
            action = annotation.get("/A")
            uri = str(action.get_object().get("/URI", "")) if action is not None else ""
            if "/Dest" in annotation and not isinstance(annotation["/Dest"], ArrayObject):
                annotation[NameObject("/Dest")] = place(source, str(annotation["/Dest"]))
            elif uri.startswith(PAGE_LINK):
                page = int(uri.removeprefix(PAGE_LINK))
                target = writer.pages[firsts[1] + page - 1].indirect_reference
                del annotation["/A"]
                annotation[NameObject("/Dest")] = ArrayObject([target, NameObject("/Fit")])
            elif uri.startswith(base):
                parts = urlsplit(uri)
                path = parts.path.removeprefix(local)
                k = printed.get(path)
                if k is not None:
                    del annotation["/A"]
                    annotation[NameObject("/Dest")] = place(k, unquote(parts.fragment))
                elif online and path.endswith(".html"):
                    published = urljoin(online, uri.removeprefix(base))
                    action.get_object()[NameObject("/URI")] = TextStringObject(published)
                else:
                    continue
            kept.append(ref)
        pdf_page[NameObject("/Annots")] = kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print the built book as a PDF.")
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "pdf" / "token-dynamics.pdf")
    parser.add_argument(
        "--api",
        choices=API_CHOICES,
        default="omit",
        help="the API reference: left out (default), alone, or at the end of the book",
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        book = print_book(args.html, args.out, api=args.api, progress=True)
    except ValueError as error:
        print(f"book_pdf: {error}", file=sys.stderr)
        return 1
    size = args.out.stat().st_size / 2**20
    print(
        f"{args.out}: {len(book.printed)} pages of the site, {pdf_pages(args.out)} PDF pages "
        f"({book.front} of title and contents), {size:.1f} MiB, "
        f"{time.perf_counter() - start:.0f} s"
    )
    print("print layout: " + ", ".join(f"{n} {key}" for key, n in book.layout.items()))
    for formula in book.unfit:
        how = (
            "inline, and cannot break: set it as display maths"
            if formula.inline
            else f"even at {MIN_MATH_SCALE:.0%} and wrapped"
        )
        print(
            f"{formula.path}: a formula {formula.width} px wide overflows its line of "
            f"{formula.room} px, {how}: {formula.tex[:120]}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
