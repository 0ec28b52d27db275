/// The console's stylesheet and script, served from `/console/static/…` (the pages' content
/// security policy allows no inline style or script, and no other site).
enum ConsoleAssets {
    /// Name to (content type, text).
    static let files: [String: (contentType: String, text: String)] = [
        "console.css": ("text/css; charset=utf-8", stylesheet),
        "console.js": ("text/javascript; charset=utf-8", script),
        "favicon.svg": ("image/svg+xml", icon),
    ]

    /// The tab's icon (without one a browser asks for `/favicon.ico`, which the server does not have).
    static let icon = """
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#1a5fb4"/><path d="M4 8h8M8 4v8" stroke="#fff" stroke-width="2"/></svg>

        """

    /// Text #1f2328 on white is 15.8:1, links and buttons #1a5fb4 6.3:1, errors #8a1526 on
    /// #fbe9eb 7.9:1: every pair of text and background is above 4.5:1.
    static let stylesheet = """
        :root { color-scheme: light; --ink: #1f2328; --muted: #4d5560; --accent: #1a5fb4; --line: #c9ced6; --danger: #a51d2d; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: #fff; }
        a { color: var(--accent); }
        a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible, summary:focus-visible, main:focus-visible {
          outline: 3px solid var(--accent); outline-offset: 2px; }
        .skip-link { position: absolute; left: -10000px; top: 0; padding: .5rem 1rem; background: #fff; }
        .skip-link:focus { left: 1rem; top: 1rem; z-index: 10; }
        header.top { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem 1.5rem; padding: .75rem 1.5rem;
          border-bottom: 1px solid var(--line); background: #f6f8fa; }
        .brand { margin: 0; font-weight: 700; }
        .brand a { color: var(--ink); text-decoration: none; }
        nav ul { display: flex; flex-wrap: wrap; gap: .25rem 1rem; list-style: none; margin: 0; padding: 0; }
        nav a { display: inline-block; padding: .25rem 0; }
        nav a[aria-current="page"] { color: var(--ink); font-weight: 700; text-decoration-thickness: 3px; }
        .sign-out { margin-left: auto; display: flex; align-items: center; gap: .75rem; }
        .who { color: var(--muted); }
        main { max-width: 72rem; padding: 1rem 1.5rem 3rem; }
        h1 { font-size: 1.75rem; margin: .5rem 0 1rem; }
        h2 { font-size: 1.3rem; margin: 2rem 0 .75rem; }
        h3 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
        table { border-collapse: collapse; margin: .5rem 0 1rem; min-width: 20rem; }
        caption { text-align: left; font-weight: 600; padding-bottom: .25rem; }
        th, td { text-align: left; padding: .35rem .75rem .35rem 0; border-bottom: 1px solid var(--line); vertical-align: top; }
        thead th { border-bottom: 2px solid var(--ink); }
        code { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: .92em; }
        code.hash { word-break: break-all; }
        ul.plain { margin: 0; padding-left: 1.1rem; }
        dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1.25rem; }
        dl.facts dt { font-weight: 600; }
        dl.facts dd { margin: 0; }
        form.stack { display: grid; gap: .5rem; max-width: 32rem; }
        form.inline { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem .75rem; margin: .5rem 0 1rem; }
        fieldset { border: 1px solid var(--line); padding: .5rem .75rem; }
        legend { font-weight: 600; padding: 0 .25rem; }
        label { font-weight: 600; }
        fieldset label { font-weight: 400; }
        input[type=text], input[type=password], input[type=number], input:not([type]), select {
          font: inherit; padding: .4rem .5rem; border: 1px solid #6e7781; border-radius: 4px; color: var(--ink); background: #fff; }
        input[aria-invalid="true"] { border: 2px solid var(--danger); }
        button { font: inherit; padding: .45rem 1rem; border: 0; border-radius: 4px; background: var(--accent); color: #fff; cursor: pointer;
          justify-self: start; }
        button:hover { background: #154a8c; }
        button.danger { background: var(--danger); }
        button.danger:hover { background: #7f1622; }
        .sign-out button { background: #fff; color: var(--accent); border: 1px solid var(--accent); padding: .25rem .75rem; }
        .hint { margin: 0; color: var(--muted); font-size: .95rem; }
        .notice { padding: .6rem .9rem; background: #e8f1fb; border-left: 4px solid var(--accent); }
        .error { padding: .6rem .9rem; background: #fbe9eb; color: #8a1526; border-left: 4px solid var(--danger); }
        .result { padding: .6rem .9rem; border-left: 4px solid var(--accent); background: #e8f1fb; margin: .75rem 0; }
        .result.ok { border-color: #1a7f37; background: #e6f4ea; }
        .result.bad { border-color: var(--danger); background: #fbe9eb; }
        .result p { margin: .25rem 0; }
        .figures { display: flex; gap: 2rem; list-style: none; padding: 0; }
        .figure { display: block; font-size: 2rem; font-weight: 700; }
        .breadcrumb { color: var(--muted); margin: .5rem 0 0; }
        .chart { margin-bottom: 2rem; }
        .chart svg { max-width: 100%; height: auto; border: 1px solid var(--line); }
        .chart svg text { font: 12px system-ui, sans-serif; fill: var(--ink); }
        .chart .bar { fill: var(--accent); }
        .chart .grid { stroke: var(--line); }
        .chart .axis { stroke: var(--ink); }
        details { margin-top: .5rem; }
        summary { cursor: pointer; color: var(--accent); }
        @media (prefers-reduced-motion: no-preference) { html { scroll-behavior: smooth; } }

        """

    /// Refreshes the charts of the activity page every 30 seconds (they are complete without it).
    static let script = """
        "use strict";
        document.addEventListener("DOMContentLoaded", () => {
          const charts = document.getElementById("charts");
          if (!charts || !charts.dataset.refresh) return;
          const refresh = async () => {
            try {
              const response = await fetch(charts.dataset.refresh, { credentials: "same-origin", headers: { Accept: "text/html" } });
              if (!response.ok || response.redirected) return;
              const open = Array.from(charts.querySelectorAll("details[open]"), (element) => element.id);
              charts.innerHTML = await response.text();
              for (const id of open) {
                const element = document.getElementById(id);
                if (element) element.open = true;
              }
            } catch (error) {
              // The next tick tries again; the page already shows the last figures.
            }
          };
          setInterval(refresh, 30000);
        });

        """
}
