import Foundation
import Hummingbird

/// What the console reads from a browser's request: its session cookie, its form, whether it
/// came over HTTPS, and whether it came from the console's own pages.
enum ConsoleRequest {
    /// The session cookie's name.
    static let cookieName = "outpost_console"
    /// The largest form the console reads (a token, a few ids).
    static let maximumFormBytes = 16 * 1024

    /// The session id the `Cookie` header carries, if any.
    static func sessionID(_ request: Request) -> String? {
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == cookieName {
                    let value = parts[1].trimmingCharacters(in: .whitespaces)
                    return value.isEmpty ? nil : value
                }
            }
        }
        return nil
    }

    /// The `Set-Cookie` value of a session: readable by no script, sent only to `/console` and
    /// only from the console's own pages, and only over HTTPS when `secure`.
    static func sessionCookie(_ id: String, maxAge: Int64, secure: Bool) -> String {
        "\(cookieName)=\(id); Path=\(ConsoleRoutes.root); Max-Age=\(max(0, maxAge)); HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    /// The `Set-Cookie` value that deletes the session cookie.
    static func expiredCookie(secure: Bool) -> String {
        sessionCookie("", maxAge: 0, secure: secure)
    }

    /// Whether the session cookie is marked `Secure`: always when configured so, when the server
    /// serves its own TLS (`--tls-cert`), or with an `https` public URL; else when the request came over HTTPS, as a trusted proxy's
    /// `X-Forwarded-Proto` says (from any other peer the header proves nothing).
    static func wantsSecureCookie(_ request: Request, context: SyncRequestContext, configuration: ServerConfiguration) -> Bool {
        if configuration.console.secureCookie { return true }
        // The server's own TLS: every request it answers came over HTTPS.
        if configuration.tls != nil { return true }
        if let base = configuration.publicBaseURL, base.lowercased().hasPrefix("https://") { return true }
        guard let peer = context.peerAddress, configuration.trustedProxies.trusts(peer),
            let proto = request.headers[values: .xForwardedProto].last?.split(separator: ",").last
        else { return false }
        return proto.trimmingCharacters(in: .whitespaces).lowercased() == "https"
    }

    /// The most fields a console form has (a token, a few ids, the CSRF token).
    static let maximumFormFields = 16

    /// The form fields of an `application/x-www-form-urlencoded` body. A form that is not one
    /// (not UTF-8, a bad percent-encoding, too many fields, a name given twice) is refused whole
    /// (400, nothing done): no field of it is guessed at.
    static func form(_ request: Request) async throws(ServiceError) -> [String: String] {
        let body: Data
        do {
            body = try await request.collectBody(limit: maximumFormBytes)
        } catch let error as ServiceError {
            throw error
        } catch {
            throw .malformed("the form could not be read")
        }
        guard let text = String(data: body, encoding: .utf8) else { throw .malformed("the form is not UTF-8") }
        return try decodeForm(text)
    }

    static func decodeForm(_ text: String) throws(ServiceError) -> [String: String] {
        var fields: [String: String] = [:]
        let pairs = text.split(separator: "&")
        guard pairs.count <= maximumFormFields else { throw .malformed("the form has \(pairs.count) fields; at most \(maximumFormFields) are read") }
        for pair in pairs {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String? {
                String(part).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
            }
            guard let name = decode(parts[0]), let value = parts.count == 2 ? decode(parts[1]) : "" else {
                throw .malformed("the form field `\(parts[0].prefix(64))` is not valid percent-encoded UTF-8")
            }
            guard fields[name] == nil else { throw .malformed("the form gives `\(name.prefix(64))` more than once") }
            fields[name] = value
        }
        return fields
    }

    /// Why a state-changing request did not come from the console's own pages, or `nil` when it
    /// did by what the browser says: `Sec-Fetch-Site` is not `cross-site`, and `Origin` (else
    /// `Referer`), when sent, names this server (its public URL, or the scheme and `Host` the
    /// request was sent to: a browser sends the `Host` of the page's own server, whatever page
    /// made the request).
    static func crossSiteRefusal(_ request: Request, configuration: ServerConfiguration) -> String? {
        if request.headers[.secFetchSite]?.lowercased() == "cross-site" {
            return "the browser says it was sent by another site"
        }
        let stated: String
        if let origin = request.headers[.origin] {
            stated = origin
        } else if let referer = request.headers[.referer] {
            guard let origin = origin(of: referer) else { return "its Referer is not a URL" }
            stated = origin
        } else {
            return nil
        }
        let own = ownOrigins(request, configuration: configuration)
        return own.contains(stated.lowercased()) ? nil : "it was sent from \(stated), not from this server"
    }

    /// `scheme://host[:port]` of a URL, lowercased.
    static func origin(of url: String) -> String? {
        guard let components = URLComponents(string: url), let scheme = components.scheme, let host = components.host, !host.isEmpty else {
            return nil
        }
        return (scheme + "://" + host + (components.port.map { ":\($0)" } ?? "")).lowercased()
    }

    /// The origins this server is reached at: its public URL's, and the request's own `Host`
    /// (over either scheme: a proxy in front may end TLS; the token in the form is what proves
    /// the page was the console's).
    static func ownOrigins(_ request: Request, configuration: ServerConfiguration) -> Set<String> {
        var origins: Set<String> = []
        if let base = configuration.publicBaseURL, let origin = origin(of: base) { origins.insert(origin) }
        if let host = request.head.authority?.lowercased() {
            origins.formUnion(["http://" + host, "https://" + host])
            // A default port may be left out of one and written in the other.
            if host.hasSuffix(":80") { origins.insert("http://" + host.dropLast(3)) }
            if host.hasSuffix(":443") { origins.insert("https://" + host.dropLast(4)) }
        }
        return origins
    }
}
