import ListrKit
import Logging

extension StoreFile.Opened {
    /// Logs what opening the store did besides opening it: leftovers removed, a migration.
    func log(to logger: Logger) {
        for leftover in removedLeftovers {
            logger.notice("removed \(leftover), a temporary file left by a run that ended during a save")
        }
        if let migratedFrom, let backup {
            logger.notice("migrated the JSON store \(migratedFrom) (\(migratedItems) items) into \(database.path); the JSON file is kept as \(backup)")
        }
        if created {
            logger.info("created an empty store at \(database.path)")
        }
    }
}
