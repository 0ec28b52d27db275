import Foundation

/// The activity page's charts: inline SVG written on the server (they need no script), each with
/// its figures in a table for screen readers and anyone who wants the numbers.
enum ConsoleCharts {
    struct Series {
        var id: String
        var title: String
        var unit: String
        /// One value per minute, oldest first; `nil` where there is nothing to measure.
        var values: [Double?]
    }

    /// The four charts of the last hour, as one HTML fragment.
    static func fragment(_ minutes: [RecentActivity.Minute]) -> String {
        let series = [
            Series(id: "push-rate", title: "Push requests per minute", unit: "requests", values: minutes.map { Double($0.pushes) }),
            Series(id: "pull-rate", title: "Pull requests per minute", unit: "requests", values: minutes.map { Double($0.pulls) }),
            Series(id: "push-p99", title: "Push p99 answer time", unit: "ms", values: minutes.map(\.pushP99Milliseconds)),
            Series(id: "pull-p99", title: "Pull p99 answer time", unit: "ms", values: minutes.map(\.pullP99Milliseconds)),
            Series(id: "live", title: "Live channels open", unit: "channels", values: minutes.map { Double($0.liveConnections) }),
        ]
        return series.map { chart($0, starts: minutes.map(\.start)) }.joined(separator: "\n")
    }

    static let width = 640.0
    static let height = 180.0
    static let left = 56.0
    static let right = 8.0
    static let top = 12.0
    static let bottom = 28.0

    static func chart(_ series: Series, starts: [Int64]) -> String {
        let present = series.values.compactMap { $0 }.map { $0.isFinite ? $0 : 10_000 }
        let scale = niceMaximum(present.max() ?? 0)
        let plotWidth = width - left - right
        let plotHeight = height - top - bottom
        let slot = plotWidth / Double(max(series.values.count, 1))
        let last = present.isEmpty ? "no requests in the last hour" : "latest \(label(series.values.last ?? nil, series.unit))"
        let summary =
            present.isEmpty
            ? "No data in the last 60 minutes."
            : "Over the last 60 minutes: highest \(label(present.max(), series.unit)), \(last)."
        var svg = """
            <svg role="img" aria-labelledby="\(series.id)-title \(series.id)-desc" viewBox="0 0 \(Int(width)) \(Int(height))" width="\(Int(width))" height="\(Int(height))" xmlns="http://www.w3.org/2000/svg">
            <title id="\(series.id)-title">\(html(series.title))</title>
            <desc id="\(series.id)-desc">\(html(summary))</desc>

            """
        for step in 0...2 {
            let value = scale * Double(step) / 2
            let y = top + plotHeight - plotHeight * Double(step) / 2
            svg += "<line class=\"grid\" x1=\"\(f(left))\" y1=\"\(f(y))\" x2=\"\(f(width - right))\" y2=\"\(f(y))\"/>"
            svg += "<text x=\"\(f(left - 6))\" y=\"\(f(y + 4))\" text-anchor=\"end\">\(html(axisLabel(value)))</text>\n"
        }
        for (index, value) in series.values.enumerated() {
            guard let value, value > 0 else { continue }
            let capped = min(value.isFinite ? value : scale, scale)
            let barHeight = max(1, plotHeight * capped / scale)
            svg += "<rect class=\"bar\" x=\"\(f(left + slot * Double(index) + 1))\" y=\"\(f(top + plotHeight - barHeight))\" "
            svg += "width=\"\(f(max(slot - 2, 1)))\" height=\"\(f(barHeight))\"/>"
        }
        svg += "\n<line class=\"axis\" x1=\"\(f(left))\" y1=\"\(f(top + plotHeight))\" x2=\"\(f(width - right))\" y2=\"\(f(top + plotHeight))\"/>"
        for (minutesAgo, anchor, x) in [(60, "start", left), (30, "middle", left + plotWidth / 2), (0, "end", width - right)] {
            let text = minutesAgo == 0 ? "now" : "\(minutesAgo) min ago"
            svg += "<text x=\"\(f(x))\" y=\"\(f(height - 8))\" text-anchor=\"\(anchor)\">\(text)</text>"
        }
        svg += "\n</svg>"

        var rows = ""
        for (start, value) in zip(starts, series.values) {
            rows += "<tr><th scope=\"row\">\(minuteLabel(start))</th><td>\(html(label(value, series.unit)))</td></tr>\n"
        }
        return """
            <section class="chart" aria-labelledby="\(series.id)-heading">
            <h2 id="\(series.id)-heading">\(html(series.title))</h2>
            <p>\(html(summary))</p>
            \(svg)
            <details id="\(series.id)-data">
            <summary>\(html(series.title)): the figures per minute</summary>
            <table>
            <caption>\(html(series.title)), per minute (UTC)</caption>
            <thead><tr><th scope="col">Minute</th><th scope="col">\(html(series.unit == "ms" ? "p99 (ms)" : series.unit.capitalized))</th></tr></thead>
            <tbody>
            \(rows)</tbody>
            </table>
            </details>
            </section>
            """
    }

    /// 1, 2 or 5 times a power of ten, at least `value` (1 when there is nothing).
    static func niceMaximum(_ value: Double) -> Double {
        guard value > 0 else { return 1 }
        let magnitude = pow(10, floor(log10(value)))
        for factor in [1.0, 2, 5, 10] where factor * magnitude >= value { return factor * magnitude }
        return 10 * magnitude
    }

    static func label(_ value: Double?, _ unit: String) -> String {
        guard let value else { return unit == "ms" ? "no requests" : "0" }
        if !value.isFinite { return "over 10000 ms" }
        return unit == "ms" ? "≤ \(axisLabel(value)) ms" : axisLabel(value)
    }

    static func axisLabel(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(format: "%.1f", value)
    }

    static func minuteLabel(_ start: Int64) -> String {
        let secondsOfDay = ((start % 86_400) + 86_400) % 86_400
        return String(format: "%02d:%02d", Int(secondsOfDay / 3600), Int(secondsOfDay % 3600 / 60))
    }

    static func f(_ value: Double) -> String { String(format: "%.1f", value) }

    static func html(_ text: String) -> String {
        var escaped = ""
        for character in text {
            switch character {
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "&": escaped += "&amp;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.append(character)
            }
        }
        return escaped
    }
}
