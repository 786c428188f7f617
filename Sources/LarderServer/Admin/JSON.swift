/// Minimal JSON text building for the admin endpoints (no Foundation on the server path).
enum JSON {
    /// A JSON string literal.
    static func string(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// An array of string literals.
    static func strings(_ texts: [String]) -> String {
        "[" + texts.map(string).joined(separator: ",") + "]"
    }

    /// An object from ordered key/raw-JSON pairs.
    static func object(_ members: [(String, String)]) -> String {
        "{" + members.map { "\(string($0.0)):\($0.1)" }.joined(separator: ",") + "}"
    }

    static func number(_ value: Double) -> String {
        value.isFinite ? String(format3(value)) : "0"
    }

    private static func format3(_ value: Double) -> String {
        let scaled = (value * 1000).rounded() / 1000
        return scaled == scaled.rounded() ? String(Int(scaled)) : String(scaled)
    }
}
