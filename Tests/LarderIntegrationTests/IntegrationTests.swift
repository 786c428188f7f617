import Testing

/// Every integration test starts real processes (larder, the origin fixture, curl) on
/// 127.0.0.1; they run one at a time so timing-sensitive cases are not starved on a small machine.
@Suite(.serialized, .timeLimit(.minutes(3))) enum IntegrationTests {}
