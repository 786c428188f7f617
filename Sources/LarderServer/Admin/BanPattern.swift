import LarderConfig

/// Which stored URLs a ban or a listing covers: those starting with a prefix, matching a glob
/// whose `*` stands for any run of characters (slashes included) and every other character for
/// itself, or one key exactly (a route's key the request determines whole). Compared with the stored key as it is kept: scheme and host lower case, the default
/// port left out, percent-escapes upper case.
enum BanPattern: Sendable, Equatable, CustomStringConvertible {
    case prefix(String)
    case glob(String)
    case exact(String)

    func matches(_ url: String) -> Bool {
        switch self {
        case .prefix(let prefix): url.hasPrefix(prefix)
        case .glob(let glob): URLPattern.glob(Array(glob.utf8), Array(url.utf8))
        case .exact(let key): url == key
        }
    }

    /// The prefix or glob itself.
    var text: String {
        switch self {
        case .prefix(let text), .glob(let text), .exact(let text): text
        }
    }

    var description: String {
        switch self {
        case .prefix(let prefix): "prefix \(prefix)"
        case .glob(let glob): "glob \(glob)"
        case .exact(let key): "key \(key)"
        }
    }
}
