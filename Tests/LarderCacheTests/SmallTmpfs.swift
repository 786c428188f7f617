import Foundation
import Glibc

/// A tmpfs of a few hundred KiB mounted on a fresh directory, so that a test can fill a
/// filesystem and see writes fail with ENOSPC where they really happen. Needs root; `init`
/// returns nil (and says why) where the mount is not possible.
final class SmallTmpfs {
    let path: String

    init?(bytes: Int, test: String) {
        guard getuid() == 0 else {
            print("skipped \(test): needs root to mount a small tmpfs")
            return nil
        }
        path = NSTemporaryDirectory() + "larder-tmpfs-" + UUID().uuidString
        guard (try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)) != nil,
            SmallTmpfs.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(bytes)", "tmpfs", path])
        else {
            print("skipped \(test): mounting a tmpfs failed")
            try? FileManager.default.removeItem(atPath: path)
            return nil
        }
    }

    /// Detaches the mount at once (`-l`: descriptors the cache still holds do not block it)
    /// and removes the mount point.
    deinit {
        _ = SmallTmpfs.run("/bin/umount", ["-l", path])
        try? FileManager.default.removeItem(atPath: path)
    }

    private static func run(_ tool: String, _ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}
