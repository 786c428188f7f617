import CLarderSystem
import Glibc

/// The target this process fuzzes, from FUZZ_TARGET (read once).
let selectedTarget: FuzzTarget = {
    let name = getenv("FUZZ_TARGET").map { String(cString: $0) } ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
        printError("larder-fuzz: set FUZZ_TARGET to one of: \(names)")
        exit(2)
    }
    return target
}()

func printError(_ text: String) {
    var bytes = Array((text + "\n").utf8)
    _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
}

/// libFuzzer's entry point: one input per call.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    selectedTarget.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

/// The executable's entry. Built for fuzzing (-DFUZZING, linked with -sanitize=fuzzer) it
/// hands over to libFuzzer's driver; a normal build replays the files named on the command
/// line through the target (to reproduce a crash, or re-run a corpus as a regression check).
@main
enum Main {
    static func main() {
        #if FUZZING
            var argc = CommandLine.argc
            var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
            exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzOneInput(data, size) })
        #else
            replay(CommandLine.arguments.dropFirst())
        #endif
    }

    static func replay(_ paths: ArraySlice<String>) {
        var count = 0
        for path in paths {
            guard let file = fopen(path, "rb") else {
                printError("larder-fuzz: cannot open \(path)")
                exit(1)
            }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let read = fread(&buffer, 1, buffer.count, file)
                if read <= 0 { break }
                bytes += buffer[0..<read]
            }
            fclose(file)
            bytes.withUnsafeBytes { selectedTarget.run($0) }
            count += 1
        }
        print("larder-fuzz: \(selectedTarget.rawValue): \(count) inputs replayed")
    }
}
