import Foundation
import Hummingbird
import Logging
import Mustache
import NIOCore

/// Renders the console's pages: a page's template inside the shared layout (navigation, the
/// sign-out form, `<main>`).
enum ConsolePages {
    /// The navigation, in order: (id, label, path).
    static let sections = [
        ("fleet", "Fleet", ConsoleRoutes.root), ("conflicts", "Conflicts", ConsoleRoutes.root + "/conflicts"),
        ("audit", "Audit log", ConsoleRoutes.root + "/audit"), ("access", "Revocations and erasures", ConsoleRoutes.root + "/access"),
        ("activity", "Last hour", ConsoleRoutes.root + "/activity"), ("sessions", "Sessions", ConsoleRoutes.root + "/sessions"),
    ]

    /// The page `template` renders from `context`, in the layout.
    static func page(
        _ template: String, title: String, session: ConsoleSession?, current: String? = nil, status: HTTPResponse.Status = .ok,
        context: [String: Any?]
    ) -> Response {
        html(document(template, title: title, session: session, current: current, context: present(context)), status: status)
    }

    /// The values that are there: Mustache writes a `nil` inside `Any` as the text "nil", where
    /// an absent key is an empty section.
    static func present(_ values: [String: Any?]) -> [String: Any] {
        values.compactMapValues { $0 }
    }

    static func document(_ template: String, title: String, session: ConsoleSession?, current: String?, context: [String: Any]) -> String {
        var context = context
        // Every form of a signed-in page carries the session's CSRF token.
        if let session { context["csrf"] = session.csrfToken }
        let body = ConsoleTemplates.library.render(context, withTemplate: template) ?? ""
        var layout: [String: Any] = ["title": title, "body": body]
        if let session {
            layout["signedIn"] = [
                "csrf": session.csrfToken, "user": session.userID, "tenant": session.tenant,
                "nav": sections.map { ["href": $0.2, "label": $0.1, "current": $0.0 == current] },
            ]
        }
        return ConsoleTemplates.library.render(layout, withTemplate: "layout") ?? ""
    }

    static func html(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    /// 303 See Other: after a form, the browser loads `location` with a GET.
    static func redirect(to location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
    }

    /// `2026-01-31 08:00:00` (UTC) of seconds since 1970.
    static func time(seconds: Int64) -> String {
        let text = Date(timeIntervalSince1970: TimeInterval(seconds)).formatted(.iso8601)
        return text.replacingOccurrences(of: "T", with: " ").replacingOccurrences(of: "Z", with: "")
    }

    static func time(milliseconds: Int64) -> String { time(seconds: milliseconds / 1000) }
}

/// A console request sent elsewhere (303): to sign in, when it has no valid session.
struct ConsoleRedirect: Error {
    var location: String

    /// To the sign-in page, saying why the session ended (`expired`, `revoked`) when it did.
    static func signIn(_ ended: String?) -> ConsoleRedirect {
        ConsoleRedirect(location: ConsoleRoutes.root + "/sign-in" + (ended.map { "?ended=\($0)" } ?? ""))
    }
}

/// A console request refused, answered with a page that says why.
struct ConsoleRefusal: Error {
    var status: HTTPResponse.Status
    var heading: String
    var message: String
    /// The session, when the request had one (the page then has the navigation).
    var session: ConsoleSession?

    init(status: HTTPResponse.Status, heading: String, message: String, session: ConsoleSession? = nil) {
        self.status = status
        self.heading = heading
        self.message = message
        self.session = session
    }

    /// A form that did not come from the console's own pages (CSRF).
    static func csrf(_ reason: String) -> ConsoleRefusal {
        ConsoleRefusal(
            status: .forbidden, heading: "Refused: this form did not come from the console",
            message:
                "The request was refused because \(reason), so it may have been sent by another site. Nothing was changed. Open the console's page again and repeat what you did there."
        )
    }

    static func crossSite(_ reason: String) -> ConsoleRefusal {
        csrf(reason)
    }

    /// A form that does not read (``ConsoleRequest/form(_:)``): refused whole.
    static func form(_ reason: String, session: ConsoleSession?) -> ConsoleRefusal {
        ConsoleRefusal(
            status: .badRequest, heading: "Refused: the form could not be read",
            message: "The request was refused because \(reason). Nothing was changed. Open the console's page again and repeat what you did there.",
            session: session)
    }
}

/// Turns what the console's handlers throw into pages: a redirect, a refusal's page, a service
/// error's status and message, and anything else into a 500 page that says nothing of the cause
/// (the log has it). The API's JSON errors never reach a console page.
struct ConsolePageMiddleware: RouterMiddleware {
    typealias Context = SyncRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let redirect as ConsoleRedirect {
            return ConsolePages.redirect(to: redirect.location)
        } catch let refusal as ConsoleRefusal {
            return Self.page(status: refusal.status, heading: refusal.heading, message: refusal.message, session: refusal.session)
        } catch let error as ServiceError {
            var response = Self.page(status: HTTPResponse.Status(code: error.status), heading: "Not done", message: error.detail.message)
            if let retryAfter = error.retryAfter { response.headers[.retryAfter] = String(retryAfter) }
            return response
        } catch {
            context.logger.error("console request failed: \(String(reflecting: error))")
            return Self.page(status: .internalServerError, heading: "Something went wrong", message: "The server failed to answer. Try again later.")
        }
    }

    static func page(status: HTTPResponse.Status, heading: String, message: String, session: ConsoleSession? = nil) -> Response {
        ConsolePages.page(
            "message", title: heading, session: session, status: status,
            context: [
                "heading": heading, "paragraphs": [message],
                "links": [["href": session == nil ? ConsoleRoutes.root + "/sign-in" : ConsoleRoutes.root, "label": "Back to the console"]],
            ])
    }
}
