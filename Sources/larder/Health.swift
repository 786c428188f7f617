import ArgumentParser
import LarderIO

/// `larder health`: the daemon's `GET /healthz`, as an exit status. The container's
/// HEALTHCHECK runs it: it finds the admin listener where the other admin commands do (the
/// configuration's `admin.listen`), so a configuration that moves it needs no other edit.
struct Health: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Exit 0 when the daemon's GET /healthz answers 200, else 1.",
        usage: "larder health [<options>]",
        discussion: """
            Prints the answer (ok, or the reasons: draining, disk tier unavailable).
            Exit status 1 means unhealthy or unreachable, as Docker's HEALTHCHECK
            expects; so does no whole answer within 5 seconds, or one over 4 KiB.
            Examples:
              larder health
              larder health --config /etc/larder/larder.toml
              larder health --admin 127.0.0.1:3129
            """)

    @OptionGroup var options: AdminOptions

    /// The whole exchange's limit: shorter than Docker's HEALTHCHECK --timeout (30 s by
    /// default), so a hung or trickling daemon is reported by this command with a reason
    /// rather than killed without one.
    static let timeoutSeconds = 5
    /// The daemon's answer is a line or two; anything much longer is not one.
    static let bodyLimit = 4096

    func run() throws {
        let address = try options.adminAddress()
        let response: BlockingHTTPClient.Response
        do {
            let client = BlockingHTTPClient(
                address: address, timeoutSeconds: Self.timeoutSeconds, deadlineSeconds: Self.timeoutSeconds, bodyLimit: Self.bodyLimit)
            response = try client.request("GET", "/healthz", headers: [("Host", address.description)])
        } catch {
            printError("larder health: \(address): \(Text.printable("\(error)"))")
            throw ExitCode(1)
        }
        // Whatever answers may be hostile: its control characters must not reach a terminal.
        let answer = Text.printable(Text.trimmed(response.text), keepingLines: true)
        guard response.status == 200 else {
            printError("larder health: \(address): \(response.status) \(answer)")
            throw ExitCode(1)
        }
        print("\(address): \(answer)")
    }
}
