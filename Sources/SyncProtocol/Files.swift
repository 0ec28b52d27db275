public import ContractRuntime
import Foundation

/// The file routes: how the bytes of a `file` field (ContractRuntime's `FileReference`) reach
/// the server and come back, apart from the rows that name them. Resumable in the manner of
/// tus: a device declares a file by its hash and size, sends its bytes from an offset in as
/// many requests as its connection allows, and asks for the offset when it lost count.
///
/// - `POST /sync/v1/files` with a ``FileUploadRequest``: ``FileUploadAnswer``. `200` with
///   `state: stored` when the server holds the file and this identity may name it (nothing to
///   send); `201` with an upload (a new one, or the one this user left unfinished for the same
///   hash) and its offset otherwise.
/// - `HEAD /sync/v1/files/uploads/{id}`: `Upload-Offset` and `Upload-Length`.
/// - `PATCH /sync/v1/files/uploads/{id}` with `Upload-Offset` (where the body starts) and
///   `Content-Type: application/offset+octet-stream`: `204` with the new `Upload-Offset`. The
///   request that sends the last byte has the file checked against its hash and stored (`422`
///   `hash_mismatch` and the upload gone when it does not match); an offset other than the
///   upload's is `409` `offset_mismatch` with the upload's offset in `Upload-Offset`.
/// - `DELETE /sync/v1/files/uploads/{id}`: the upload abandoned.
/// - `GET /sync/v1/files/{sha256}`: the file's bytes, with `Range` (`206`), `ETag` (the hash),
///   `Content-Type`. `404` alike for a file the server lacks and one this identity may not read.
///
/// A row naming a file is accepted on a push only when the server holds the file and the
/// pushing identity may name it (it uploaded it, or may read a row that names it): `409`
/// `file_missing` otherwise. So no device ever pulls a row whose file the server lacks.
public enum FileRoutes {
    /// `POST`: declare a file to upload.
    public static let files = "/sync/v1/files"
    /// The path of an upload (`HEAD`, `PATCH`, `DELETE`).
    public static func upload(_ id: String) -> String { "/sync/v1/files/uploads/\(id)" }
    /// The path of a stored file (`GET`).
    public static func file(_ sha256: String) -> String { "/sync/v1/files/\(sha256)" }

    /// Where an upload's body starts, and (answering) how far it got.
    public static let uploadOffset = "Upload-Offset"
    /// An upload's whole size.
    public static let uploadLength = "Upload-Length"
    /// The content type of a `PATCH` body.
    public static let offsetContentType = "application/offset+octet-stream"
}

/// `POST /sync/v1/files`: the file a device is about to send.
public struct FileUploadRequest: Codable, Sendable, Hashable {
    /// Lowercase hex SHA-256 of the file's bytes.
    public var sha256: String
    /// The file's size in bytes.
    public var size: Int64
    /// The file's content type, `type/subtype`.
    public var contentType: String
    /// The file's name, if the reference carries one.
    public var name: String?

    /// The request for the file a reference names.
    public init(_ reference: FileReference) {
        sha256 = reference.sha256
        size = reference.byteCount
        contentType = reference.contentType
        name = reference.name
    }

    /// The reference the request declares.
    ///
    /// - Throws: `FileReferenceError` when a part of it is not valid.
    public func reference() throws(FileReferenceError) -> FileReference {
        try FileReference(sha256: sha256, byteCount: size, contentType: contentType, name: name)
    }

    enum CodingKeys: String, CodingKey {
        case sha256, size, name
        case contentType = "content_type"
    }
}

/// The answer to `POST /sync/v1/files`.
public struct FileUploadAnswer: Codable, Sendable, Hashable {
    /// Where the file stands on the server.
    public enum State: String, Codable, Sendable, Hashable {
        /// The server holds the file and this identity may name it: nothing to send.
        case stored
        /// Send the bytes from ``FileUploadAnswer/offset`` to the upload.
        case uploading
    }

    /// The file's SHA-256, as the request named it.
    public var sha256: String
    /// Whether the server holds the file or waits for its bytes.
    public var state: State
    /// The upload to send to; `nil` when stored.
    public var uploadID: String?
    /// How many bytes the upload holds: where the next `PATCH` starts.
    public var offset: Int64

    /// An answer from its parts.
    public init(sha256: String, state: State, uploadID: String?, offset: Int64) {
        self.sha256 = sha256
        self.state = state
        self.uploadID = uploadID
        self.offset = offset
    }

    enum CodingKeys: String, CodingKey {
        case sha256, state, offset
        case uploadID = "upload_id"
    }
}
