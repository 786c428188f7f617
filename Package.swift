// swift-tools-version:6.0
import Foundation
import PackageDescription

// Module order (a module may depend only on modules listed before it):
// LarderIO, LarderHTTP, LarderConfig, LarderCache, LarderTLS, LarderUpstream, LarderServer, larder.
// LarderUpstream uses LarderTLS for one question about the TLS sessions libcurl makes (bytes
// OpenSSL holds on an idle connection), so that OpenSSL is called from one file only.
// LarderIO sits below DESIGN's list: the epoll event loop is shared by the server's sockets
// and by libcurl's sockets (LarderUpstream drives curl's multi interface on the same loop),
// so it cannot live in LarderServer. See docs/ARCHITECTURE.md.
// CI builds with LARDER_WERROR=1 (.ci/run): a warning in Larder's own code fails the build
// there, while a newer toolchain's new warning does not stop someone building from source.
let warningsAsErrors: [SwiftSetting] =
    ProcessInfo.processInfo.environment["LARDER_WERROR"] == "1" ? [.unsafeFlags(["-warnings-as-errors"])] : []

let strict: [SwiftSetting] =
    warningsAsErrors + [
        .enableUpcomingFeature("ExistentialAny"),
        // Release builds drop the run-time exclusivity checks on class properties (debug builds,
        // and so the tests, keep them, and scripts/fuzz.sh turns them back on): about 20 checks per
        // request on the hit path, ~11 % of a memory hit's instructions (docs/PERFORMANCE.md, "Design choices").
        .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release)),
    ]

let package = Package(
    name: "larder",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "larder", targets: ["larder"]),
        // Fuzz targets: built with libFuzzer by `make fuzz` (see Fuzz/README.md); a normal
        // build replays corpus files through them.
        .executable(name: "larder-fuzz", targets: ["LarderFuzz"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.1.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(
            name: "CSystemd", path: "Sources/CSystemd", pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(
            name: "CCrypt", path: "Sources/CCrypt", pkgConfig: "libxcrypt",
            providers: [.apt(["libcrypt-dev"])]),
        // OpenSSL 3: the local CA (and the TLS sessions of intercepted tunnels). Its X509 API
        // rather than swift-certificates: libssl is needed for the record layer anyway, so one
        // library serves both, and the build compiles no second copy of a crypto library.
        .systemLibrary(
            name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]),
        .target(name: "CLarderSystem", path: "Sources/CLarderSystem"),
        // The disk entries' CRC-64: loops for the CPU's carry-less multiply and a table loop in
        // one binary, chosen per call (Swift cannot build a function for a CPU feature).
        .target(name: "CChecksum", path: "Sources/CChecksum"),
        .target(name: "LarderIO", dependencies: ["CLarderSystem"], swiftSettings: strict),
        .target(name: "LarderHTTP", swiftSettings: strict),
        .target(name: "LarderConfig", dependencies: ["LarderIO", "LarderHTTP"], swiftSettings: strict),
        .target(
            name: "LarderCache",
            dependencies: [
                "CChecksum", "LarderIO", "LarderHTTP", "LarderConfig", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        .target(name: "LarderTLS", dependencies: ["COpenSSL", "LarderIO", "LarderConfig"], swiftSettings: strict),
        .target(
            name: "LarderUpstream", dependencies: ["CCurl", "LarderIO", "LarderHTTP", "LarderConfig", "LarderTLS"],
            swiftSettings: strict),
        .target(
            name: "LarderServer",
            dependencies: [
                "CSystemd", "CCrypt", "LarderIO", "LarderHTTP", "LarderConfig", "LarderCache", "LarderUpstream", "LarderTLS",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strict),
        .executableTarget(
            name: "larder",
            dependencies: [
                "LarderServer", "LarderConfig", "LarderHTTP", "LarderIO", "LarderTLS",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict,
            // mimalloc replaces glibc's malloc for the whole process (Swift runtime and libcurl
            // included): ~11 % less CPU per cache miss, because glibc's heap fragments between
            // the memory tier's long-lived entries and each request's short-lived objects.
            // docs/PERFORMANCE.md, "Design choices". Package: libmimalloc-dev (scripts/install-deps.sh).
            linkerSettings: [.linkedLibrary("mimalloc")]),
        .executableTarget(
            name: "LarderFuzz", dependencies: ["CLarderSystem", "LarderHTTP", "LarderConfig", "LarderCache"], path: "Fuzz/LarderFuzz",
            swiftSettings: strict),
        .testTarget(name: "LarderIOTests", dependencies: ["LarderIO"]),
        .testTarget(name: "LarderHTTPTests", dependencies: ["LarderHTTP"]),
        .testTarget(name: "LarderCacheTests", dependencies: ["LarderCache", "LarderHTTP", "LarderConfig", "LarderIO"]),
        .testTarget(name: "LarderConfigTests", dependencies: ["LarderConfig"]),
        .testTarget(name: "LarderUpstreamTests", dependencies: ["LarderUpstream", "LarderConfig", "LarderHTTP", "LarderIO"]),
        .testTarget(name: "LarderTLSTests", dependencies: ["LarderTLS", "LarderConfig"]),
        .testTarget(name: "LarderServerTests", dependencies: ["LarderServer", "LarderConfig", "LarderIO", "LarderUpstream"]),
        .testTarget(name: "LarderIntegrationTests", dependencies: ["LarderServer"], exclude: ["Fixtures"]),
    ]
)
