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
            expects.
            Examples:
              larder health
              larder health --config /etc/larder/larder.toml
              larder health --admin 127.0.0.1:3129
            """)

    @OptionGroup var options: AdminOptions

    /// Shorter than Docker's HEALTHCHECK --timeout, so a hung daemon is reported by this command
    /// with a reason rather than killed without one.
    static let timeoutSeconds = 5

    func run() throws {
        let address = try options.adminAddress()
        let response: BlockingHTTPClient.Response
        do {
            response = try BlockingHTTPClient(address: address, timeoutSeconds: Self.timeoutSeconds).request(
                "GET", "/healthz", headers: [("Host", address.description)])
        } catch {
            printError("larder health: \(address): \(error)")
            throw ExitCode(1)
        }
        let answer = Text.trimmed(response.text)
        guard response.status == 200 else {
            printError("larder health: \(address): \(response.status) \(answer)")
            throw ExitCode(1)
        }
        print("\(address): \(answer)")
    }
}
