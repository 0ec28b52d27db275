import Mustache

/// The console's pages as Mustache templates, kept in the binary (no resource bundle to ship).
/// `{{name}}` escapes what it writes for HTML; the one unescaped value, `{{{body}}}` and
/// `{{{charts}}}`, is markup the server wrote itself from escaped values.
enum ConsoleTemplates {
    static let library: MustacheLibrary = {
        var library = MustacheLibrary()
        for (name, text) in all {
            // The templates are literals of this file; a test renders every one.
            try! library.register(text, named: name)
        }
        return library
    }()

    static let all: [String: String] = [
        "layout": layout, "sign-in": signIn, "message": message, "fleet": fleet, "device": device, "conflicts": conflicts, "audit": audit,
        "access": access, "erase-confirm": eraseConfirm, "erased": erased, "activity": activity, "sessions": sessions,
    ]

    static let layout = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{title}} · Outpost console</title>
        <link rel="icon" href="/console/static/favicon.svg" type="image/svg+xml">
        <link rel="stylesheet" href="/console/static/console.css">
        <script src="/console/static/console.js" defer></script>
        </head>
        <body>
        <a class="skip-link" href="#main">Skip to the content</a>
        <header class="top">
        <p class="brand"><a href="/console">Outpost console</a></p>
        {{#signedIn}}
        <nav aria-label="Console sections">
        <ul>
        {{#nav}}<li><a href="{{href}}"{{#current}} aria-current="page"{{/current}}>{{label}}</a></li>
        {{/nav}}
        </ul>
        </nav>
        <form class="sign-out" method="post" action="/console/sign-out">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <span class="who">{{user}} · tenant {{tenant}}</span>
        <button type="submit">Sign out</button>
        </form>
        {{/signedIn}}
        </header>
        <main id="main" tabindex="-1">
        {{{body}}}
        </main>
        </body>
        </html>

        """

    static let signIn = """
        <h1>Sign in</h1>
        {{#notice}}<p class="notice" role="status">{{notice}}</p>{{/notice}}
        {{#error}}<p class="error" role="alert" id="sign-in-error">{{error}}</p>{{/error}}
        <form method="post" action="/console/sign-in" class="stack">
        <label for="token">Admin token</label>
        <p class="hint" id="token-hint">An admin token of this server, as <code>sync-server token --admin</code> prints it. It opens a session of at most 8 hours (never past the token's own expiry) and is not kept.</p>
        <input id="token" name="token" type="password" autocomplete="off" spellcheck="false" required aria-describedby="token-hint{{#error}} sign-in-error{{/error}}"{{#error}} aria-invalid="true"{{/error}}>
        <button type="submit">Sign in</button>
        </form>
        """

    static let message = """
        <h1>{{heading}}</h1>
        {{#paragraphs}}<p>{{.}}</p>
        {{/paragraphs}}
        {{#links}}<p><a href="{{href}}">{{label}}</a></p>
        {{/links}}
        """

    static let fleet = """
        <h1>Fleet</h1>
        {{#census}}
        <p>Devices of tenant {{tenant}} the server has seen, as of {{generatedAt}}. A device is active when it synced in the last {{windowLabel}}.</p>
        <form method="get" action="/console" class="inline">
        <label for="active">Active window</label>
        <select id="active" name="active">
        {{#windows}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>
        {{/windows}}
        </select>
        <button type="submit">Show</button>
        </form>
        <ul class="figures">
        <li><span class="figure">{{active}}</span> active</li>
        <li><span class="figure">{{stale}}</span> stale</li>
        </ul>
        <section aria-labelledby="contracts-heading">
        <h2 id="contracts-heading">Devices per contract version</h2>
        {{#hasContracts}}
        <table>
        <caption>Schema versions devices declared, per contract</caption>
        <thead><tr><th scope="col">Contract</th><th scope="col">Version</th><th scope="col">Active</th><th scope="col">Stale</th></tr></thead>
        <tbody>
        {{#contracts}}<tr><th scope="row">{{contract}}</th><td>{{version}}</td><td>{{active}}</td><td>{{stale}}</td></tr>
        {{/contracts}}
        </tbody>
        </table>
        {{/hasContracts}}
        {{^hasContracts}}<p>No device has declared its schema versions yet.</p>{{/hasContracts}}
        </section>
        <section aria-labelledby="apps-heading">
        <h2 id="apps-heading">Devices per app version</h2>
        {{#hasAppVersions}}
        <table>
        <caption>App versions devices declared</caption>
        <thead><tr><th scope="col">App version</th><th scope="col">Active</th><th scope="col">Stale</th></tr></thead>
        <tbody>
        {{#appVersions}}<tr><th scope="row">{{version}}</th><td>{{active}}</td><td>{{stale}}</td></tr>
        {{/appVersions}}
        </tbody>
        </table>
        {{/hasAppVersions}}
        {{^hasAppVersions}}<p>No device has declared its app version yet.</p>{{/hasAppVersions}}
        </section>
        <section aria-labelledby="gate-heading">
        <h2 id="gate-heading">Rollout gate</h2>
        <p>What raising a contract's <code>oldest_supported</code> would do now: active devices below it are refused (426 <code>schema_too_old</code>) and must update before they sync again.</p>
        <form method="get" action="/console" class="inline">
        <input type="hidden" name="active" value="{{activeValue}}">
        <label for="gate-contract">Contract</label>
        <select id="gate-contract" name="contract">
        {{#contractNames}}<option value="{{name}}"{{#selected}} selected{{/selected}}>{{name}}</option>
        {{/contractNames}}
        </select>
        <label for="gate-version">Proposed oldest_supported</label>
        <input id="gate-version" name="oldest_supported" type="number" min="1" step="1" value="{{gateVersion}}" required>
        <button type="submit">Check</button>
        </form>
        {{#gate}}
        <div class="result {{tone}}" role="status">
        <p><strong>{{headline}}</strong></p>
        <p>{{explanation}}</p>
        </div>
        {{/gate}}
        </section>
        <section aria-labelledby="devices-heading">
        <h2 id="devices-heading">Devices, most recently seen first</h2>
        {{#hasDevices}}
        <table>
        <caption>The {{deviceCount}} most recently seen devices</caption>
        <thead><tr><th scope="col">Device</th><th scope="col">User</th><th scope="col">App</th><th scope="col">Last seen (UTC)</th><th scope="col">Last outcome</th><th scope="col">State</th></tr></thead>
        <tbody>
        {{#devices}}<tr><th scope="row"><a href="{{href}}">{{device}}</a></th><td>{{user}}</td><td>{{app}}</td><td>{{lastSeen}}</td><td>{{outcome}}</td><td>{{state}}</td></tr>
        {{/devices}}
        </tbody>
        </table>
        {{/hasDevices}}
        {{^hasDevices}}<p>No device has synced with this server yet.</p>{{/hasDevices}}
        </section>
        {{/census}}
        {{^census}}
        <p>{{unavailable}}</p>
        {{/census}}
        """

    static let device = """
        <p class="breadcrumb"><a href="/console">Fleet</a> › {{user}} › {{device}}</p>
        <h1>Device {{device}}</h1>
        {{#notice}}<p class="notice" role="status">{{notice}}</p>{{/notice}}
        <dl class="facts">
        <dt>User</dt><dd>{{user}}</dd>
        <dt>Tenant</dt><dd>{{tenant}}</dd>
        <dt>App version</dt><dd>{{app}}</dd>
        <dt>First seen (UTC)</dt><dd>{{firstSeen}}</dd>
        <dt>Last seen (UTC)</dt><dd>{{lastSeen}}</dd>
        <dt>Requests</dt><dd>{{pushes}} pushes, {{pulls}} pulls, {{failures}} failed</dd>
        <dt>Access</dt><dd>{{access}}</dd>
        </dl>
        <section aria-labelledby="schema-heading">
        <h2 id="schema-heading">Schema versions</h2>
        {{#hasSchema}}
        <table>
        <caption>Contract versions the device declared</caption>
        <thead><tr><th scope="col">Contract</th><th scope="col">Version</th></tr></thead>
        <tbody>
        {{#schema}}<tr><th scope="row">{{contract}}</th><td>{{version}}</td></tr>
        {{/schema}}
        </tbody>
        </table>
        {{/hasSchema}}
        {{^hasSchema}}<p>The device has not declared its schema versions (it runs the server's current ones).</p>{{/hasSchema}}
        </section>
        <section aria-labelledby="queue-heading">
        <h2 id="queue-heading">Queue and conflicts</h2>
        {{#hasTelemetry}}
        <table>
        <caption>What the device last reported of itself</caption>
        <thead><tr><th scope="col">Measure</th><th scope="col">Value</th></tr></thead>
        <tbody>
        {{#telemetry}}<tr><th scope="row">{{name}}</th><td>{{value}}</td></tr>
        {{/telemetry}}
        </tbody>
        </table>
        {{/hasTelemetry}}
        {{^hasTelemetry}}<p>The device has not reported its queue yet.</p>{{/hasTelemetry}}
        </section>
        <section aria-labelledby="syncs-heading">
        <h2 id="syncs-heading">Recent syncs</h2>
        {{#hasRecent}}
        <table>
        <caption>The device's latest requests, newest first</caption>
        <thead><tr><th scope="col">When (UTC)</th><th scope="col">Route</th><th scope="col">Status</th><th scope="col">Outcome</th><th scope="col">Milliseconds</th></tr></thead>
        <tbody>
        {{#recent}}<tr><td>{{when}}</td><td>{{route}}</td><td>{{status}}</td><td>{{outcome}}</td><td>{{milliseconds}}</td></tr>
        {{/recent}}
        </tbody>
        </table>
        {{/hasRecent}}
        {{^hasRecent}}<p>No sync recorded.</p>{{/hasRecent}}
        </section>
        <section aria-labelledby="revoke-heading">
        <h2 id="revoke-heading">Revoke</h2>
        <p>Every token of device <strong>{{device}}</strong> issued until now is refused from its next request on (401 <code>token_revoked</code>), on every server process. A device id names one installation: every user's device of this id is refused. To let it back, issue it a new token more than a minute from now.</p>
        <form method="post" action="{{revokeAction}}">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <button type="submit" class="danger">Revoke device {{device}}</button>
        </form>
        </section>
        """

    static let conflicts = """
        <h1>Conflicts and rejections</h1>
        <p>Pushes in tenant {{tenant}} with a conflicted or rejected mutation, newest first, as the audit log records them. Only ids, outcomes and codes are shown, never the rows' values.</p>
        {{#hasEntries}}
        <table>
        <caption>Pushes with conflicts or rejections</caption>
        <thead><tr><th scope="col">Entry</th><th scope="col">Recorded (UTC)</th><th scope="col">User</th><th scope="col">Device</th><th scope="col">Push</th><th scope="col">Conflicted or rejected mutations</th></tr></thead>
        <tbody>
        {{#entries}}<tr><td>{{id}}</td><td>{{when}}</td><td>{{user}}</td><td><a href="{{deviceHref}}">{{device}}</a></td><td>{{push}} ({{outcome}})</td>
        <td>{{#erased}}Details erased with the user's data.{{/erased}}{{#hasChanges}}<ul class="plain">{{#changes}}<li>{{entity}} <code>{{rowID}}</code>: {{outcome}}{{#reason}} ({{reason}}){{/reason}}{{#seq}}, seq {{seq}}{{/seq}}</li>{{/changes}}</ul>{{/hasChanges}}</td></tr>
        {{/entries}}
        </tbody>
        </table>
        {{#older}}<p><a href="{{older}}" rel="next">Older pushes</a></p>{{/older}}
        {{/hasEntries}}
        {{^hasEntries}}<p>No conflicted or rejected push{{#paged}} before these{{/paged}}.</p>{{/hasEntries}}
        {{#paged}}<p><a href="/console/conflicts">Newest pushes</a></p>{{/paged}}
        """

    static let audit = """
        <h1>Audit log</h1>
        <section aria-labelledby="head-heading">
        <h2 id="head-heading">Head</h2>
        <dl class="facts">
        <dt>Last entry</dt><dd>{{lastID}}</dd>
        <dt>Last seal</dt><dd><code class="hash">{{lastHash}}</code></dd>
        <dt>Sealed with the audit key from entry</dt><dd>{{keyedFrom}}</dd>
        <dt>Audit key fingerprint</dt><dd><code class="hash">{{fingerprint}}</code></dd>
        </dl>
        </section>
        <section aria-labelledby="verify-heading">
        <h2 id="verify-heading">Verify</h2>
        <p>Checks the head's seal, then every entry in order, as <code>sync-server audit verify</code> does (the whole log, every tenant's; a long log takes a while).</p>
        {{#result}}
        <div class="result {{tone}}" role="status">
        <p><strong>{{headline}}</strong></p>
        {{#notes}}<p>{{.}}</p>
        {{/notes}}
        </div>
        {{/result}}
        <form method="post" action="/console/audit/verify">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <button type="submit">Verify the audit log</button>
        </form>
        </section>
        <section aria-labelledby="archives-heading">
        <h2 id="archives-heading">Archives</h2>
        {{#archivedThrough}}<p>Entries 1–{{archivedThrough}} were archived: the log here starts after the sealed base at entry {{archivedThrough}}, and verification starts from that base.</p>{{/archivedThrough}}
        {{^archivedThrough}}<p>No entry has been archived: the log here starts at entry 1.</p>{{/archivedThrough}}
        <p>The server does not keep archive files: <code>sync-server audit archive --to FILE</code> writes them where the operator says. Check one with <code>sync-server audit verify --archive FILE</code>.</p>
        </section>
        """

    static let access = """
        <h1>Revocations and erasures</h1>
        {{#notice}}<p class="notice" role="status">{{notice}}</p>{{/notice}}
        <section aria-labelledby="revocations-heading">
        <h2 id="revocations-heading">Revocations</h2>
        {{#hasRevocations}}
        <table>
        <caption>Revoked devices and users of tenant {{tenant}}</caption>
        <thead><tr><th scope="col">Kind</th><th scope="col">Id</th><th scope="col">Revoked at (UTC)</th></tr></thead>
        <tbody>
        {{#revocations}}<tr><td>{{kind}}</td><td>{{subject}}</td><td>{{when}}</td></tr>
        {{/revocations}}
        </tbody>
        </table>
        {{/hasRevocations}}
        {{^hasRevocations}}<p>Nothing is revoked in tenant {{tenant}}.</p>{{/hasRevocations}}
        <h3>Revoke a device or a user</h3>
        <form method="post" action="/console/revocations" class="stack">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <fieldset>
        <legend>What to revoke</legend>
        <div><input type="radio" id="kind-device" name="kind" value="device" checked> <label for="kind-device">A device (every user's device of that id)</label></div>
        <div><input type="radio" id="kind-user" name="kind" value="user"> <label for="kind-user">A user (all their devices)</label></div>
        </fieldset>
        <label for="subject">Device or user id</label>
        <input id="subject" name="subject" required autocomplete="off" spellcheck="false">
        <button type="submit" class="danger">Revoke</button>
        </form>
        </section>
        <section aria-labelledby="erasures-heading">
        <h2 id="erasures-heading">Erasures</h2>
        {{#hasErasures}}
        <table>
        <caption>Users of tenant {{tenant}} whose data was erased</caption>
        <thead><tr><th scope="col">User</th><th scope="col">Erased at (UTC)</th></tr></thead>
        <tbody>
        {{#erasures}}<tr><td>{{user}}</td><td>{{when}}</td></tr>
        {{/erasures}}
        </tbody>
        </table>
        {{/hasErasures}}
        {{^hasErasures}}<p>No user's data has been erased in tenant {{tenant}}.</p>{{/hasErasures}}
        <h3>Erase a user's data</h3>
        <p>The next page shows what would be erased and asks you to confirm.</p>
        <form method="get" action="/console/erasures/confirm" class="stack">
        <label for="erase-user">User id</label>
        <input id="erase-user" name="user" required autocomplete="off" spellcheck="false">
        <button type="submit">Review the erasure</button>
        </form>
        </section>
        """

    static let eraseConfirm = """
        <h1>Erase the data of user {{user}}?</h1>
        {{#error}}<p class="error" role="alert" id="confirm-error">{{error}}</p>{{/error}}
        <p>This cannot be undone. In tenant {{tenant}}, in one transaction:</p>
        <ul>
        <li>{{rows}} rows of the scopes the user owns become bare tombstones, and {{events}} events are deleted.{{#hasScopes}}
        <ul>{{#scopes}}<li><code>{{key}}</code>: {{rows}} rows, {{events}} events</li>{{/scopes}}</ul>{{/hasScopes}}</li>
        <li>The stored push results of the user's devices are deleted.{{#hasDevices}}
        <ul>{{#devices}}<li><code>{{.}}</code></li>{{/devices}}</ul>{{/hasDevices}}</li>
        <li>The details of the user's audit entries become unreadable; every seal still verifies.</li>
        <li>The user leaves every team.{{#hasTeams}}
        <ul>{{#teams}}<li><code>{{.}}</code></li>{{/teams}}</ul>{{/hasTeams}}</li>
        <li>Every token of the user issued until now is refused with 410 <code>user_erased</code>: their devices wipe their stores.</li>
        </ul>
        {{#erasedBefore}}<p>This user's data was already erased at {{erasedBefore}}: this erases what arrived since.</p>{{/erasedBefore}}
        <form method="post" action="/console/erasures" class="stack">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="user" value="{{user}}">
        <label for="confirm">Type the user id, <strong>{{user}}</strong>, to confirm</label>
        <input id="confirm" name="confirm" required autocomplete="off" spellcheck="false"{{#error}} aria-invalid="true" aria-describedby="confirm-error"{{/error}}>
        <button type="submit" class="danger">Erase the data of {{user}}</button>
        </form>
        <p><a href="/console/access">Cancel: back to revocations and erasures</a></p>
        """

    static let erased = """
        <h1>User {{user}} erased</h1>
        <p class="notice" role="status">The data of user {{user}} in tenant {{tenant}} was erased at {{when}}.</p>
        <ul>
        <li>{{rows}} rows turned into bare tombstones, {{events}} events deleted.</li>
        <li>{{pushResults}} stored push results deleted.</li>
        <li>{{auditDetails}} audit details made unreadable.</li>
        </ul>
        <p><a href="/console/access">Back to revocations and erasures</a></p>
        """

    static let sessions = """
        <h1>Sessions</h1>
        {{#notice}}<p class="notice" role="status">{{notice}}</p>{{/notice}}
        <p>The console sessions open in tenant {{tenant}}, newest first: at most {{limit}} at once (signing in past it ends the oldest). A session also ends when it expires, when the key that signed its admin token is retired, and when the admin's device or user is revoked or erased. Ending your own signs you out.</p>
        <table>
        <caption>{{count}} open console sessions of tenant {{tenant}}</caption>
        <thead><tr><th scope="col">Opened (UTC)</th><th scope="col">Expires (UTC)</th><th scope="col">User</th><th scope="col">Device</th><th scope="col">Token key</th><th scope="col">End</th></tr></thead>
        <tbody>
        {{#sessions}}<tr><td>{{opened}}</td><td>{{expires}}</td><td>{{user}}{{#own}} (this session){{/own}}</td><td>{{device}}</td><td><code>{{kid}}</code></td>
        <td><form method="post" action="/console/sessions/end" class="inline">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="session" value="{{handle}}">
        <button type="submit" class="danger" id="end-{{handle}}">{{#own}}End this session (sign out){{/own}}{{^own}}End the session of {{user}} opened {{opened}}{{/own}}</button>
        </form></td></tr>
        {{/sessions}}
        </tbody>
        </table>
        """

    static let activity = """
        <h1>The last hour</h1>
        <p>Per minute, as this server process counted them (a process keeps its own, from when it started; Prometheus on <code>/metrics</code> has every process's). Each chart has its figures in a table below it.</p>
        <div id="charts" data-refresh="/console/activity/charts">
        {{{charts}}}
        </div>
        """
}
