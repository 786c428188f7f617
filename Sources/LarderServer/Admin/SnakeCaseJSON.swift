import FoundationEssentials

/// The JSON form of the admin documents (`/stats`, `/cache`): snake-case keys, sorted, one
/// line with a trailing newline; the CLI reads them back with the same types.
enum SnakeCaseJSON {
    static func encode(_ value: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(value)) + [10]
    }

    static func decode<Document: Decodable>(_ type: Document.Type, from bytes: [UInt8]) throws -> Document {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode(type, from: Data(bytes))
    }
}
