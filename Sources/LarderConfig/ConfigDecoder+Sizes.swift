extension ConfigDecoder {
    /// A tier's object limit above the tier's own size: no object that large could ever be
    /// kept there. Reported at the object limit the file sets (a tier made small on purpose,
    /// with the default object limit, keeps its meaning: objects that large skip it).
    mutating func checkObjectLimits(_ config: Config, in document: ConfigDocument) {
        if config.memory.maxBytes > 0, config.memory.maxObjectBytes > config.memory.maxBytes,
            let value = Self.value(of: "max_object_bytes", in: "memory", document)
        {
            let tier = Units.format(bytes: Int64(config.memory.maxBytes))
            fail(
                "memory.max_object_bytes \(value.summary) is larger than the whole memory tier (memory.max_bytes \(tier)); "
                    + "set it to at most \"\(tier)\" or raise memory.max_bytes",
                at: value.position)
        }
        if config.disk.maxObjectBytes > config.disk.maxBytes, let value = Self.value(of: "max_object_bytes", in: "disk", document) {
            let tier = Units.format(bytes: config.disk.maxBytes)
            fail(
                "disk.max_object_bytes \(value.summary) is larger than the whole disk tier (disk.max_bytes \(tier)); "
                    + "set it to at most \"\(tier)\" or raise disk.max_bytes",
                at: value.position)
        }
    }

    /// The value a table of the file sets for a key.
    static func value(of key: String, in section: String, _ document: ConfigDocument) -> ConfigValue? {
        document.tables.first { $0.name == section }?.entries.first { $0.key == key }?.value
    }
}
