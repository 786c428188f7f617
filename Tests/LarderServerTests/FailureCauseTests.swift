import LarderHTTP
import LarderUpstream
import Testing

@testable import LarderServer

/// The access log's causes: each upstream failure kind and rejected request has one, and a
/// status Larder answered without naming a cause implies one.
@Suite struct FailureCauseTests {
    @Test func everyUpstreamKindHasACause() {
        func cause(_ kind: UpstreamError.Kind) -> FailureCause { FailureCause(UpstreamError(kind: kind, message: "", afterHead: false)) }
        #expect(cause(.dns) == .dns && cause(.connect) == .connect && cause(.timeout) == .timeout && cause(.tls) == .tls)
        #expect(cause(.reset) == .reset && cause(.truncated) == .truncated && cause(.protocolError) == .framing)
        #expect(cause(.digest) == .digest && cause(.forbidden) == .refused)
        #expect(cause(.aborted) == .upstream && cause(.other) == .upstream)
    }

    @Test func aRejectedRequestIsALimitOrMalformed() {
        #expect(FailureCause(HTTPParseError(431, "head too large")) == .limit)
        #expect(FailureCause(HTTPParseError(414, "target too long")) == .limit)
        #expect(FailureCause(HTTPParseError(400, "bare LF")) == .request)
        #expect(FailureCause(HTTPParseError(501, "unknown transfer coding")) == .request)
    }

    @Test func aStatusImpliesACauseAndASuccessNone() {
        #expect(FailureCause.implied(byStatus: 407) == .auth)
        #expect(FailureCause.implied(byStatus: 403) == .refused)
        #expect(FailureCause.implied(byStatus: 508) == .loop)
        #expect(FailureCause.implied(byStatus: 504) == .timeout)
        #expect(FailureCause.implied(byStatus: 400) == .request)
        #expect(FailureCause.implied(byStatus: 200) == nil && FailureCause.implied(byStatus: 304) == nil)
    }

    /// Each token is one word of the closed set a log reader can match on, and Squid's code is
    /// one of Squid's.
    @Test func tokensAreSingleWordsAndSquidCodesAreSquids() {
        for cause in FailureCause.allCases {
            #expect(!cause.rawValue.isEmpty && cause.rawValue.allSatisfy { $0.isLowercase || $0 == "-" }, "\(cause)")
            #expect(cause.squidErrorCode.hasPrefix("ERR_"))
        }
        #expect(Set(FailureCause.allCases.map(\.rawValue)).count == FailureCause.allCases.count)
    }
}
