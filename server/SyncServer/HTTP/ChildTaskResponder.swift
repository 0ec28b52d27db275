package import Hummingbird

/// Answers each request in a child task of its connection's task, which ends when the response
/// is made (its body is written afterwards, by the connection's task).
///
/// Swift keeps the memory of a task's async frames (its stack allocator's slabs) until the task
/// ends, at the deepest the task ever went. A connection's task lives as long as the connection:
/// one held open by the live channel (`GET /sync/v1/live`), or kept alive between requests,
/// would otherwise keep the frames of routing, every middleware and the route, about 30 KiB, for
/// hours. In a child task they go back to the heap as soon as the route answers.
package struct ChildTaskResponder<Wrapped: HTTPResponder>: HTTPResponder where Wrapped.Context: Sendable {
    package typealias Context = Wrapped.Context
    let wrapped: Wrapped

    package init(_ wrapped: Wrapped) {
        self.wrapped = wrapped
    }

    package func respond(to request: Request, context: Context) async throws -> Response {
        try await withThrowingTaskGroup(of: Response.self) { group in
            group.addTask { try await wrapped.respond(to: request, context: context) }
            return try await group.next()!
        }
    }
}
