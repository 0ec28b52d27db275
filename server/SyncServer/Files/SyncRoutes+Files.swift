import ContractRuntime
import Foundation
import HTTPTypes
import Hummingbird
import SyncProtocol

extension HTTPField.Name {
    static let uploadOffset = Self(FileRoutes.uploadOffset)!
    static let uploadLength = Self(FileRoutes.uploadLength)!
}

extension SyncRoutes {
    /// `POST /sync/v1/files`: a file about to be sent (``FileService/declare(_:identity:)``).
    @Sendable func declareFile(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let json = try await request.jsonBody(limit: configuration.maximumBodyBytes, maximumDepth: configuration.maximumJSONDepth)
        let body: FileUploadRequest
        do {
            body = try JSONTreeDecoder.decode(FileUploadRequest.self, from: json)
        } catch {
            throw ServiceError.malformed("the body must be {\"sha256\", \"size\", \"content_type\", \"name\"?}: \(error)")
        }
        let (answer, created) = try await fileService.declare(body, identity: identity)
        var response = try Response.json(answer, status: created ? .created : .ok, request: request)
        if let id = answer.uploadID {
            response.headers[HTTPField.Name.location] = FileRoutes.upload(id)
            response.headers[HTTPField.Name.uploadOffset] = String(answer.offset)
            response.headers[HTTPField.Name.uploadLength] = String(body.size)
        }
        return response
    }

    /// `HEAD /sync/v1/files/uploads/{upload}`: how far the upload got.
    @Sendable func fileUploadOffset(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let id = try context.parameters.require("upload")
        let (offset, size) = try await fileService.offset(of: id, identity: identity)
        return Response(status: .ok, headers: [.uploadOffset: String(offset), .uploadLength: String(size), .cacheControl: "no-store"])
    }

    /// `PATCH /sync/v1/files/uploads/{upload}`: bytes of the upload from `Upload-Offset`, streamed
    /// to the blob store as they arrive.
    @Sendable func receiveFileBytes(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let id = try context.parameters.require("upload")
        // The shared limit of a body of file bytes, before anything else is read.
        let body = try request.boundedBody(limit: configuration.maximumAssetBytes)
        guard let type = request.headers[.contentType], type.lowercased().hasPrefix(FileRoutes.offsetContentType) else {
            throw ServiceError(status: 415, .malformedRequest, "an upload's bytes come as Content-Type: \(FileRoutes.offsetContentType)")
        }
        guard let text = request.headers[.uploadOffset], let offset = Int64(text), offset >= 0 else {
            throw ServiceError.malformed("a PATCH names where its bytes start in Upload-Offset, a whole number")
        }
        if let encoding = request.headers[.contentEncoding], encoding.lowercased() != "identity" {
            throw ServiceError(status: 415, .malformedRequest, "an upload's bytes are sent as they are, without Content-Encoding")
        }
        let received: FileService.Received
        do {
            received = try await fileService.receive(id, at: offset, body: body, identity: identity)
        } catch {
            throw Self.withUploadOffset(error)
        }
        var headers: HTTPFields = [HTTPField.Name.uploadOffset: String(received.offset)]
        if received.stored { headers[.eTag] = "\"\(received.sha256)\"" }
        return Response(status: .noContent, headers: headers)
    }

    /// An `offset_mismatch` answers with the upload's offset in `Upload-Offset` too, as tus does.
    private static func withUploadOffset(_ error: ServiceError) -> any Error {
        guard error.detail.code == .offsetMismatch, case .object(let fields)? = error.detail.details, case .int(let offset)? = fields["offset"]
        else { return error }
        return ResponseError(error: error, headers: [HTTPField.Name.uploadOffset: String(offset)])
    }

    /// `DELETE /sync/v1/files/uploads/{upload}`: the upload abandoned.
    @Sendable func abandonFileUpload(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        try await fileService.abandon(try context.parameters.require("upload"), identity: identity)
        return Response(status: .noContent)
    }

    /// `GET` and `HEAD /sync/v1/files/{sha256}`: the file's bytes (or a range of them), streamed
    /// from the blob store a piece at a time.
    @Sendable func downloadFile(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let file = try await fileService.readable(try context.parameters.require("sha256"), identity: identity)
        return try await FileDownload.response(for: file, blobs: fileService.blobs, request: request)
    }
}

/// A stored file as an HTTP response, as `/assets/{id}` answers: its SHA-256 as a strong
/// `ETag` (`If-None-Match` answers 304), one byte range for resumable downloads (206; 416 with
/// `Content-Range: bytes */size` past the end), the body read from the blob store a piece at a
/// time as the client takes it.
enum FileDownload {
    static func response(for file: FileService.Readable, blobs: any BlobStore, request: Request) async throws -> Response {
        let eTag = "\"\(file.key.sha256)\""
        var headers: HTTPFields = [
            .eTag: eTag, .acceptRanges: "bytes", .contentType: file.contentType, .cacheControl: "private, max-age=31536000, immutable",
            // A device's file is data, never a page of this origin: a browser saves it rather than shows it.
            .contentDisposition: "attachment",
        ]
        if AssetResponse.matches(request.headers[values: .ifNoneMatch], eTag: eTag) {
            return Response(status: .notModified, headers: headers)
        }
        var range = AssetResponse.parseRange(request.headers[.range], size: file.size)
        if let ifRange = request.headers[.ifRange], ifRange != eTag { range = .whole }
        let status: HTTPResponse.Status
        let bytes: ClosedRange<Int64>?
        switch range {
        case .unsatisfiable:
            throw ResponseError(
                error: ServiceError(
                    status: 416, .rangeNotSatisfiable, "the range \(request.headers[.range] ?? "") is outside the file's \(file.size) bytes"),
                headers: [.contentRange: "bytes */\(file.size)", .eTag: eTag, .acceptRanges: "bytes"])
        case .whole:
            status = .ok
            bytes = file.size > 0 ? 0...(file.size - 1) : nil
        case .partial(let part):
            status = .partialContent
            bytes = part
            headers[.contentRange] = "bytes \(part.lowerBound)-\(part.upperBound)/\(file.size)"
        }
        headers[.contentLength] = String(bytes?.count ?? 0)
        guard request.method != .head, let bytes else { return Response(status: status, headers: headers) }
        return Response(status: status, headers: headers, body: ResponseBody(asyncSequence: BlobChunks(store: blobs, key: file.key, range: bytes)))
    }
}
